"""`frontier-bench import-results` and `export --format llm-d-report`: another tool's files become a run folder
that the paper, the frontier and `compare` read like ours, marked measured-by-<tool>; nothing is half-written;
the exported report validates against llm-d's v0.2 schema and carries our energy and quality."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from benchlib import cli
from benchlib.analysis import compare
from benchlib.analysis.task_stats import summarize_requests
from benchlib.interchange import llmd_export
from benchlib.paper.catalog import Inputs
from benchlib.paper.runs import load_reference_sets, load_runs
from benchlib.paper.settings import Settings
from benchlib.paper.systems import all_systems
from benchlib.paper.tables import runs_table
from benchlib.records.rows import read_requests
from tests.fakes.synthetic_run import SYN_HOST, SYN_MODEL, write_synthetic_run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SOURCES = {"aiperf": FIXTURES / "aiperf", "guidellm": FIXTURES / "guidellm" / "benchmarks.json",
           "vllm-bench": FIXTURES / "vllm-bench" / "result.json"}
PARAMS = """host:
  name: bench-box
  hardware: "a fake server on this machine"
server:
  kind: openai
  software: fake
  base_url: http://127.0.0.1:18431
  model: fake-model
"""


@pytest.fixture
def params_file(tmp_path):
    path = tmp_path / "deployment.yaml"
    path.write_text(PARAMS)
    return path


def import_results(tool: str, source: Path, params_file: Path, *more: str) -> int:
    return cli.main(["import-results", "--from", tool, str(source), "--params", str(params_file), *more])


def test_each_tools_run_appears_in_the_paper_frontier_and_compare_marked_with_the_tool(outputs, params_file,
                                                                                      capsys):
    for tool, source in SOURCES.items():
        assert import_results(tool, source, params_file) == 0
    write_synthetic_run(outputs, with_media=False)  # one of ours beside them
    runs = load_runs(outputs)
    imported = {f"fake-model · fake · measured-by-{tool} · bench-box" for tool in SOURCES}
    names = set(runs.meta["system"])
    assert names == imported | {f"{SYN_MODEL} · fake-server · {SYN_HOST}"}
    systems = all_systems(pd.DataFrame(), runs)
    assert set(systems["system"]) == names and systems["avg_decode_tps"].notna().all()
    assert imported <= set(runs_table(runs).data["system"])
    inputs = Inputs(load_reference_sets(), runs, Settings.from_parameters(str(outputs)))
    assert imported <= set(inputs.frontier[0].data["system"])  # judged on the frontier beside the paper's systems
    deployments = set(compare.read_root(str(outputs))["deployment"])
    assert deployments == names  # compare names each deployment as the paper does
    manifest = json.loads(next(outputs.glob("bench-box/*aiperf/aiperf/manifest.json")).read_text())
    assert manifest["measured_by"]["tool"] == "aiperf" and manifest["measured_by"]["version"] == "0.13.0"
    assert manifest["measured_by"]["model"] == "fake-model" and manifest["measured_by"]["model_mismatch"] is False
    assert manifest["measured_by"]["command"].startswith("aiperf profile")
    assert "energy and power (no telemetry windows)" in manifest["cannot_give"]


def test_importing_the_same_files_again_changes_nothing_and_other_files_need_fresh(outputs, params_file, tmp_path,
                                                                                   capsys):
    assert import_results("guidellm", SOURCES["guidellm"], params_file) == 0
    folder = next(outputs.glob("bench-box/*/guidellm"))
    before = (folder / "requests.csv").read_bytes()
    assert import_results("guidellm", SOURCES["guidellm"], params_file) == 0
    assert "already imported" in capsys.readouterr().out and (folder / "requests.csv").read_bytes() == before
    other = tmp_path / "other.json"
    data = json.loads(SOURCES["guidellm"].read_text())
    data["benchmarks"][0]["requests"]["successful"] = data["benchmarks"][0]["requests"]["successful"][:5]
    other.write_text(json.dumps(data))
    assert import_results("guidellm", other, params_file) == 2
    assert "--fresh" in capsys.readouterr().err and (folder / "requests.csv").read_bytes() == before
    assert import_results("guidellm", other, params_file, "--fresh") == 0
    assert len(pd.read_csv(folder / "requests.csv")) == 5
    assert len(list(folder.parent.glob("guidellm.archived-*"))) == 1


def other_params(tmp_path: Path, model_lines: str) -> Path:
    path = tmp_path / "other-deployment.yaml"
    path.write_text(PARAMS.replace("  model: fake-model\n", model_lines))
    return path


@pytest.mark.parametrize("tool", sorted(SOURCES))
def test_another_models_results_are_refused_in_one_line_naming_both_and_nothing_is_written(outputs, tmp_path,
                                                                                            capsys, tool):
    params = other_params(tmp_path, "  model: smollm2\n  model_id: /models/SmolLM2-135M-Instruct-Q4_1.gguf\n")
    assert import_results(tool, SOURCES[tool], params) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {SOURCES[tool].name}: {tool} measured 'fake-model', {params} names 'smollm2' "
                   f"(server.model_id '/models/SmolLM2-135M-Instruct-Q4_1.gguf'); give the params of the deployment "
                   f"it measured, or --model-mismatch-ok to file it under 'smollm2' anyway\n")
    assert not outputs.exists() or not [p for p in outputs.rglob("*") if p.is_file()]


def test_model_mismatch_ok_files_it_under_the_params_model_and_the_manifest_says_the_names_differed(outputs, tmp_path,
                                                                                                    capsys):
    params = other_params(tmp_path, "  model: smollm2\n")
    assert import_results("guidellm", SOURCES["guidellm"], params, "--model-mismatch-ok") == 0
    assert "--model-mismatch-ok" in capsys.readouterr().out
    manifest = json.loads((outputs / "bench-box/smollm2_measured-by-guidellm/guidellm/manifest.json").read_text())
    assert manifest["measured_by"]["model"] == "fake-model" and manifest["measured_by"]["model_mismatch"] is True


@pytest.mark.parametrize("served, recorded", [
    ("  model: smollm2\n  model_id: FAKE-Model\n", "fake-model"),  # the id the server lists, any case
    ("  model: smollm2\n  model_id: /srv/gguf/fake-model.gguf\n", "fake-model"),  # the served file's name
    ("  model: smollm2\n  model_id: /srv/gguf/fake-model.gguf\n", "/srv/gguf/fake-model.gguf"),  # its path
    ("  model: smollm2\n", "/srv/gguf/SmolLM2.gguf"),  # a tool that recorded the served path, the params' name
    ("  model: smollm2\n", "pre-flight"),  # the id the deployment's pre-flight found the server listing
])
def test_the_same_model_under_another_name_the_deployment_is_known_by_imports(outputs, tmp_path, served, recorded):
    params = other_params(tmp_path, served)
    source = tmp_path / "benchmarks.json"
    data = json.loads(SOURCES["guidellm"].read_text())
    if recorded == "pre-flight":
        deployment = outputs / "bench-box" / "smollm2"
        deployment.mkdir(parents=True)
        (deployment / "preflight.json").write_text(json.dumps({"model": "smollm2", "model_id": "fake-model"}))
    else:
        data["config"]["spec"]["backend"]["model"] = recorded
    source.write_text(json.dumps(data))
    assert import_results("guidellm", source, params) == 0
    manifest = json.loads((outputs / "bench-box/smollm2_measured-by-guidellm/guidellm/manifest.json").read_text())
    assert manifest["measured_by"]["model_mismatch"] is False


def test_a_malformed_file_is_one_line_and_nothing_is_written(outputs, params_file, tmp_path, capsys):
    bad = tmp_path / "aiperf"
    bad.mkdir()
    shutil.copy(SOURCES["aiperf"] / "profile_export_aiperf.json", bad)
    lines = (SOURCES["aiperf"] / "profile_export.jsonl").read_text().splitlines()
    lines[-1] = lines[-1].replace('"request_start_ns":', '"request_start_ns":"soon",'  '"was":')
    (bad / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    assert import_results("aiperf", bad, params_file) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{bad / 'profile_export.jsonl'}: record 32" in err
    assert not list(outputs.rglob("requests.csv")) and not list(outputs.rglob(".*importing*"))


def test_an_aggregates_only_import_keeps_the_tools_figures_and_says_what_it_lacks(outputs, params_file, tmp_path):
    only = tmp_path / "summary-only"
    only.mkdir()
    shutil.copy(SOURCES["aiperf"] / "profile_export_aiperf.json", only)
    assert import_results("aiperf", only, params_file) == 0
    folder = next(outputs.glob("bench-box/*/aiperf"))
    assert not (folder / "requests.csv").exists()
    summary = pd.read_csv(folder / "summary.csv")
    aggregate = json.loads((only / "profile_export_aiperf.json").read_text())
    assert summary.loc[0, "ttft_s_p50"] == pytest.approx(aggregate["time_to_first_token"]["p50"] / 1e3)
    assert "not available: per-request rows" in summary.loc[0, "note"]
    runs = load_runs(outputs)
    assert runs.meta.loc[0, "system"] == "fake-model · fake · measured-by-aiperf · bench-box"
    report = llmd_export.build_report(folder)
    llmd_export.validate(report)
    assert report["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]["p50"] == \
        pytest.approx(aggregate["time_to_first_token"]["p50"] / 1e3)


def test_export_of_an_imported_run_validates_and_gives_its_figures(outputs, params_file, capsys):
    assert import_results("aiperf", SOURCES["aiperf"], params_file) == 0
    folder = next(outputs.glob("bench-box/*/aiperf"))
    assert cli.main(["export", "--format", "llm-d-report", str(folder)]) == 0
    report = json.loads((folder / llmd_export.REPORT_NAME).read_text())
    llmd_export.validate(report)
    aggregate = json.loads((SOURCES["aiperf"] / "profile_export_aiperf.json").read_text())
    latency = report["results"]["request_performance"]["aggregate"]["latency"]
    assert latency["time_to_first_token"]["p50"] == pytest.approx(aggregate["time_to_first_token"]["p50"] / 1e3)
    assert latency["request_latency"]["p50"] == pytest.approx(aggregate["request_latency"]["p50"] / 1e3)
    assert report["scenario"]["load"]["standardized"]["tool"] == "aiperf"
    assert report["results"]["request_performance"]["aggregate"]["requests"]["total"] == 30  # warm-ups left out


def test_export_carries_our_energy_and_quality_and_refuses_what_breaks_the_schema(tmp_path, capsys):
    root = write_synthetic_run(tmp_path / "outputs", with_media=False)
    folder = root / SYN_HOST / SYN_MODEL / "text"
    report = llmd_export.build_report(folder)
    llmd_export.validate(report)
    ours = next(c for c in report["scenario"]["stack"] if c["metadata"]["label"] == "frontier-bench")
    assert ours["standardized"]["energy"] == {"measured": False, "reason": "synthetic: no energy sensor"}
    quality = {q["task"]: q for q in ours["standardized"]["quality"]}
    assert (quality["basic_qa"]["n_passed"], quality["basic_qa"]["n_scored"]) == (2, 3)
    windows = pd.read_csv(folder / "windows.csv")
    windows.loc[windows["kind"] == "task", ["energy_j", "avg_power_w", "energy_boundary"]] = [50.0, 25.0, "CPU package"]
    windows.to_csv(folder / "windows.csv", index=False)
    assert cli.main(["export", "--format", "llm-d-report", str(folder)]) == 0
    report = json.loads((folder / llmd_export.REPORT_NAME).read_text())
    energy = next(c for c in report["scenario"]["stack"] if c["metadata"]["label"] == "frontier-bench")[
        "standardized"]["energy"]
    tokens = float(pd.read_csv(folder / "requests.csv").query("status == 'ok' and not is_warmup")[
        "completion_tokens"].sum())
    assert energy["energy_j"] == 100.0 and energy["tokens_per_joule"] == pytest.approx(tokens / 100.0)
    power = report["results"]["observability"]["components"][0]["aggregate"]["power_consumption"]
    assert (power["units"], power["mean"]) == ("Watts", 25.0)
    broken = dict(report, run={"description": "no uid"})
    with pytest.raises(llmd_export.ExportError, match="breaks llm-d's v0.2 schema at run"):
        llmd_export.validate(broken)
    assert cli.main(["export", "--format", "llm-d-report", str(tmp_path)]) == 2
    assert "not a run folder" in capsys.readouterr().err


def test_an_api_key_the_tool_recorded_is_not_written(outputs, params_file, tmp_path):
    """AIPerf records its command line and config as given: a key passed with --api-key or a header stays out of
    manifest.json."""
    folder = tmp_path / "keyed"
    folder.mkdir()
    shutil.copy(SOURCES["aiperf"] / "profile_export.jsonl", folder)
    data = json.loads((SOURCES["aiperf"] / "profile_export_aiperf.json").read_text())
    key = "sk-live-0123456789abcdef"
    data["run_info"]["cli_command"] += f" --streaming --api-key '{key}' -H 'Authorization: Bearer {key}'"
    data["input_config"]["endpoint"]["api_key"] = key
    (folder / "profile_export_aiperf.json").write_text(json.dumps(data))
    assert import_results("aiperf", folder, params_file) == 0
    written = "".join(p.read_text() for p in outputs.rglob("*") if p.is_file())
    assert key not in written
    manifest = json.loads(next(outputs.rglob("manifest.json")).read_text())
    # the header's name kept, its value not
    assert manifest["measured_by"]["command"].endswith("--streaming --api-key *** -H 'Authorization: ***'")


@pytest.mark.parametrize("tool", list(SOURCES))
def test_the_streamed_imports_summary_is_the_summary_of_its_requests_csv(outputs, params_file, tool):
    """The import keeps only the summary's columns as it streams (no read-back of requests.csv): its summary.csv
    is what requests.csv, read back whole, summarises to."""
    assert import_results(tool, SOURCES[tool], params_file) == 0
    folder = next(outputs.glob(f"bench-box/*/{tool}"))
    again = summarize_requests(read_requests(folder / "requests.csv"))
    pd.testing.assert_frame_equal(pd.read_csv(folder / "summary.csv"),
                                  pd.read_csv(io.StringIO(again.to_csv(index=False))))
