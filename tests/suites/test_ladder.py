"""The quantization ladder: bytes read per token from GGUF tensor tables, rungs made by llama.cpp's quantizer and
cached, the host's bandwidth measured, the bandwidth law fitted, the paper's ladder table and figure. The whole
study on the real embedded model: integration/test_ladder_end_to_end.py."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pandas as pd
import pytest
import yaml

from benchlib.analysis import bandwidth_law
from benchlib.analysis.weights import read_cached, read_gguf
from benchlib.config.params import load_params
from benchlib.config.paths import PROJECT_ROOT
from benchlib.measure.capacity import bandwidth
from benchlib.measure.models.quantize import QuantizeError, derived_from, make_rung
from benchlib.measure.servers.llama_cpp import default_model_path
from benchlib.paper import assembly
from benchlib.paper.runs import load_runs
from benchlib.suites import ladder
from tests.helpers import ladder_params


def tiny_gguf(path: Path, tied: bool) -> Path:
    """A two-layer model file written with the gguf package: a 1000 × 64 f32 embedding table, 2 × 64 × 64 f16
    matrices, a norm, and (untied) an f16 output matrix."""
    writer = gguf.GGUFWriter(str(path), "gemma3")
    writer.add_file_type(int(gguf.LlamaFileType.MOSTLY_F16))
    writer.add_tensor("token_embd.weight", np.zeros((1000, 64), dtype=np.float32))
    for i in range(2):
        writer.add_tensor(f"blk.{i}.ffn_up.weight", np.zeros((64, 64), dtype=np.float16))
    writer.add_tensor("output_norm.weight", np.zeros(64, dtype=np.float32))
    if not tied:
        writer.add_tensor("output.weight", np.zeros((1000, 64), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


EMB, MATS, NORM, OUT = 1000 * 64 * 4, 2 * 64 * 64 * 2, 64 * 4, 1000 * 64 * 2


def test_tied_embeddings_are_read_in_full_per_token(tmp_path):
    w = read_gguf(tiny_gguf(tmp_path / "tied.gguf", tied=True))
    assert w.tied_embeddings and w.file_type == "MOSTLY_F16"
    assert w.tensor_bytes == EMB + MATS + NORM
    assert w.read_per_token_bytes == w.tensor_bytes  # the logits multiply by the whole table
    assert w.embedding_type == "F32" and w.tensor_types == {"F16": 2, "F32": 2}


def test_untied_embeddings_are_one_row_per_token(tmp_path):
    w = read_gguf(tiny_gguf(tmp_path / "untied.gguf", tied=False))
    assert not w.tied_embeddings
    assert w.tensor_bytes == EMB + MATS + NORM + OUT
    assert w.read_per_token_bytes == MATS + NORM + OUT + 64 * 4  # one f32 row of the table
    assert w.n_params == 1000 * 64 * 2 + 2 * 64 * 64 + 64


def test_weights_are_memoised_and_a_non_gguf_file_is_named(tmp_path):
    model = tiny_gguf(tmp_path / "m.gguf", tied=True)
    cache = tmp_path / "cache" / "weights.json"
    first = read_cached(model, cache)
    assert str(model.resolve()) in cache.read_text()
    assert read_cached(model, cache) == first
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="bad.gguf: not a readable GGUF file"):
        read_gguf(bad)


def test_a_rung_is_quantized_once_and_cached_by_source_hash_and_type(tmp_path):
    source = Path(default_model_path())
    rung = make_rung(source, "q4_k_m", "q4_0", tmp_path)
    assert rung.made and rung.derived_from == "" and rung.path.is_file()
    assert rung.path.name.endswith("-q4_0.gguf") and rung.path.stat().st_size < source.stat().st_size
    again = make_rung(source, "q4_k_m", "q4_0", tmp_path)
    assert not again.made and again.path == rung.path
    assert not list(tmp_path.glob(".*.tmp")), "no temp file left"
    source_rung = make_rung(source, "q4_k_m", "q4_k_m", tmp_path)
    assert source_rung.path == source and not source_rung.made
    assert derived_from("q8_0", "q4_k_m") == "q4_k_m" and derived_from("q2_k", "q4_k_m") == ""


def test_a_failed_quantization_quotes_the_quantizers_log(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF but not really")
    with pytest.raises(QuantizeError, match=r"quantizing broken.gguf to q8_0 failed \(exit"):
        make_rung(bad, "q4_k_m", "q8_0", tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("*.gguf")), "nothing that looks like a rung is left"
    with pytest.raises(ValueError, match="unknown quantization type 'q3'; the ladder knows q2_k"):
        make_rung(bad, "q4_k_m", "q3", tmp_path / "cache")


def test_bandwidth_is_measured_with_its_method():
    measured = bandwidth.measure(size_mib=64, repeats=2)
    assert measured["read_gbs"] > 0.1 and measured["copy_gbs"] > 0.1
    assert len(measured["read_gbs_passes"]) == 2 and max(measured["copy_gbs_passes"]) == pytest.approx(
        measured["copy_gbs"], rel=0.01)
    assert "STREAM" in measured["method"] and "64 MiB" in measured["method"]


def _points(gb: list[float], tps: list[float], read_gbs: float = 20.0) -> pd.DataFrame:
    return pd.DataFrame({"read_per_token_gb": gb, "decode_tps": tps, "implied_gbs": np.multiply(gb, tps),
                         "read_gbs": read_gbs, "copy_gbs": 30.0})


def test_the_law_fit_recovers_an_exact_law_and_a_shallower_one():
    gb = [0.2, 0.3, 0.5, 0.8]
    exact = bandwidth_law.fit_law(_points(gb, [10 / g for g in gb]))
    assert exact["slope"] == pytest.approx(-1.0) and exact["beff_gbs"] == pytest.approx(10.0)
    assert exact["r2"] == pytest.approx(1.0) and exact["share_of_read_bandwidth"] == pytest.approx(0.5)
    shallow = bandwidth_law.fit_law(_points(gb, [10 / g ** 0.5 for g in gb]))
    assert shallow["slope"] == pytest.approx(-0.5)
    too_few = bandwidth_law.fit_law(_points(gb[:2], [50.0, 33.0]))
    assert too_few["n_rungs"] == 2 and math.isnan(too_few["slope"]) and math.isnan(too_few["beff_gbs"])


def write_ladder(root: Path, host: str = "lab") -> None:
    rungs = []
    for qtype, gb, derived in (("q2_k", 0.20, ""), ("q4_k_m", 0.25, ""), ("q8_0", 0.30, "q4_k_m")):
        rungs.append({"qtype": qtype, "model": f"m-{qtype}", "derived_from": derived, "path": f"/x/{qtype}.gguf",
                      "weights": {"file_type": f"MOSTLY_{qtype.upper()}", "size_bytes": int(gb * 1e9),
                                  "tensor_bytes": int(gb * 1e9), "n_params": 270_000_000,
                                  "read_per_token_bytes": int(gb * 1e9), "embedding_type": "Q8_0",
                                  "tensor_types": {"Q8_0": 3}}})
    (root / host).mkdir(parents=True, exist_ok=True)
    (root / host / "ladder.json").write_text(json.dumps({
        "host": host, "rungs": rungs, "bandwidth": {"read_gbs": 25.0, "copy_gbs": 40.0, "method": "test method"}}))


def requests_for(host: str = "lab") -> pd.DataFrame:
    common = {"suite": "text", "modality": "text", "task": "basic_qa", "variant": "v", "status": "ok", "ttft_s": 0.2,
              "e2e_s": 1.0, "completion_tokens": 16}
    rows = []
    for model, tps, passes in (("m-q2_k", 60.0, 1), ("m-q4_k_m", 50.0, 3), ("m-q8_0", 42.0, 4)):
        for i in range(4):
            rows.append({**common, "host": host, "model": model, "repeat": i, "is_warmup": False,
                         "decode_tps": tps + i * 0.5, "passed": i < passes})
        rows.append({**common, "host": host, "model": model, "repeat": 0, "is_warmup": True,
                     "decode_tps": 1.0, "passed": True})  # a warm-up: never counted
    return pd.DataFrame(rows)


def test_ladder_points_pool_speed_and_accuracy_and_withhold_derived_accuracy(tmp_path):
    write_ladder(tmp_path)
    points = bandwidth_law.ladder_points(bandwidth_law.read_ladders(tmp_path), requests_for())
    by = points.set_index("qtype")
    assert by.loc["q2_k", "decode_tps"] == pytest.approx(60.75) and by.loc["q2_k", "n_decode"] == 4
    assert by.loc["q2_k", "accuracy"] == pytest.approx(0.25) and by.loc["q2_k", "n_scored"] == 4
    assert 0 < by.loc["q2_k", "accuracy_lo"] < 0.25 < by.loc["q2_k", "accuracy_hi"] < 1
    assert math.isnan(by.loc["q8_0", "accuracy"]) and by.loc["q8_0", "n_scored"] == 0  # carries q4_k_m's only
    assert by.loc["q4_k_m", "ceiling_tps"] == pytest.approx(100.0)
    assert by.loc["q4_k_m", "share_of_ceiling"] == pytest.approx(50.75 / 100.0)


def test_the_paper_has_the_ladder_table_law_and_figure_only_when_a_ladder_ran(tmp_path, monkeypatch):
    empty = assembly.assemble(outputs_dir=tmp_path / "none", out_dir=tmp_path / "out0")
    assert "ladder" not in empty.tables
    assert "No quantization ladder in outputs/ yet" in (tmp_path / "out0" / "report.md").read_text()
    root = tmp_path / "outputs"
    write_ladder(root)
    runs = load_runs(root)
    requests = requests_for()  # named by each deployment's name, as load_runs names every frame's rows
    requests["system"] = [runs.name(host, model) for host, model in zip(requests["host"], requests["model"])]
    monkeypatch.setattr(runs, "requests", requests)
    paper = assembly.build_tables(assembly.load_reference_sets(), runs)
    table = paper["ladder"].display
    assert list(table["rung"]) == ["q2_k", "q4_k_m", "q8_0"]
    assert table.loc[2, "accuracy [95% CI]"] == "— carries q4_k_m's information (derived_from)"
    assert table.loc[0, "decode tok/s [95% CI]"].startswith("60.8 [") and "(n=4)" in table.loc[0, "decode tok/s [95% CI]"]
    law = paper["ladder_law"].data
    assert law["ladder"].str.contains("004").any(), "the published ladder is fitted beside ours"
    ours = law[law["ladder"].str.contains("lab")].iloc[0]
    assert ours["n_rungs"] == 3 and -2 < ours["slope"] < 0 and ours["read_gbs"] == 25.0
    figures = assembly.build_figures(paper, runs)
    assert "ladder" in figures


def test_rung_params_rename_the_model_and_keep_the_source_rung_as_the_base(tmp_path):
    base = load_params(ladder_params(tmp_path))
    rung = ladder.rung_params(base, "q8_0", Path("/cache/x-q8_0.gguf"), "q4_k_m", 1.06)
    assert rung.server.model == "gemma3-270m-q8_0" and rung.server.quantization == "q8_0"
    assert rung.server.derived_from == "q4_k_m" and rung.server.embedded.model_path == "/cache/x-q8_0.gguf"
    assert rung.identity() != base.identity()
    assert ladder.rung_params(base, "q4_k_m", Path("/x"), "", 0.6) is base
    assert ladder.suites_for(rung) == ["text"]


def test_the_ladder_refuses_a_server_it_cannot_quantize(tmp_path):
    data = yaml.safe_load(ladder_params(tmp_path).read_text())
    data["server"] = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "quantization": "q4_k_m"}
    path = tmp_path / "remote.yaml"
    path.write_text(yaml.safe_dump(data))
    done = subprocess.run([sys.executable, "-m", "benchlib.cli", "ladder", str(path)], capture_output=True, text=True,
                          cwd=PROJECT_ROOT, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "the ladder quantizes the embedded server's GGUF; server.kind is 'openai'" in done.stderr
