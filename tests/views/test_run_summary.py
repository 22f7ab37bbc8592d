"""The terminal after a study reads at a glance: each deployment's full name printed once (the plan), its short
label after it; the closing summary on one screen (at most 35 lines, none over 120 characters) — the deployments'
table with intervals and failed requests, the verdict in one line, the thresholds with their verdict words
explained where they are shown — and the per-task table in a file whose path it prints."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from benchlib import cli
from benchlib.config.formatting import WIDTH, fit
from benchlib.config.identity import key_lines, shared_part, short_labels
from benchlib.views import run_summary
from tests.fakes.synthetic_run import SYN_HOST, SYN_MODEL, write_graded, write_synthetic_run

GEMMA, SMOL = "gemma3-270m-q4_k_m", "smollm2-135m-instruct-q4_1"


def names(model: str) -> str:
    return f"{model} · llama-cpp-python · demo · local-cpu"


def deployment(model: str) -> dict:
    return {"host": {"name": "local-cpu"},
            "server": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": model,
                       "software": "llama-cpp-python", "variant": "demo"},
            "thresholds": {"min_decode_tps": 20, "max_ttft_ms": 500, "min_entity_recall": 0.5}}


@pytest.fixture
def study_output(tmp_path, monkeypatch, capsys):
    """`frontier-bench study` over two deployments whose suites are synthetic run folders (SmolLM2 at full speed,
    10 of 12 graded items right; Gemma at half the speed, 3 of the same 12 right and 2 answers cut)."""
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(tmp_path / "outputs"))
    path = tmp_path / "glance.yaml"
    path.write_text(yaml.safe_dump({"name": "glance", "notebooks": ["text", "quality"], "settle": {"timeout_s": 0},
                                    "paper": False, "deployments": [{"params": deployment(GEMMA)},
                                                                    {"params": deployment(SMOL)}]}), encoding="utf-8")
    scratch = tmp_path / "synthetic"

    def runner(params, notebooks, fresh):
        slow = params.server.model == GEMMA
        variant = "slow" if slow else ""
        write_synthetic_run(scratch, variant=variant, speed=0.5 if slow else 1.0, with_media=False,
                            text_passed=not slow)
        write_graded(scratch, [True] * 3 + [False] * 9 if slow else [True] * 10 + [False] * 2, variant=variant,
                     cut=2 if slow else 0)
        source = scratch / SYN_HOST / (f"{SYN_MODEL}+{variant}" if variant else SYN_MODEL)
        dirs = []
        for suite in notebooks:
            folder = params.suite_dir(suite)
            shutil.copytree(source / suite, folder, dirs_exist_ok=True)
            manifest = json.loads((folder / "manifest.json").read_text())
            manifest["params"] = json.loads(params.model_dump_json())  # named as the deployment's params name it
            (folder / "manifest.json").write_text(json.dumps(manifest))
            dirs.append(folder)
        return {}, dirs

    monkeypatch.setattr(cli, "_suite_runner", lambda quiet: runner)
    assert cli.main(["study", str(path), "--no-paper", "--quiet"]) == 0
    return capsys.readouterr().out, tmp_path / "outputs"


def test_each_full_name_once_then_the_short_label(study_output):
    out, _ = study_output
    for model in (GEMMA, SMOL):
        assert out.count(names(model)) == 1, out
    assert "  gemma3-270m   = gemma3-270m-q4_k_m · llama-cpp-python · demo · local-cpu" in out
    assert "■ deployment 1/2: gemma3-270m · suites text, quality · run id " in out
    assert "■ deployment 2/2: smollm2-135m · suites text, quality · run id " in out
    assert all(len(line) <= WIDTH for line in out.splitlines()), max(out.splitlines(), key=len)


def test_the_closing_summary_fits_one_screen(study_output):
    out, root = study_output
    closing = out[out.index("per task: "):].splitlines()
    assert len(closing) <= 35, "\n".join(closing)
    assert all(len(line) <= WIDTH for line in closing)
    table = closing[closing.index(next(line for line in closing if line.startswith("deployment "))):]
    header, gemma, smol = table[:3]
    assert header.split("  ")[:1] == ["deployment"] and "TTFT ms [95% CI]" in header and "failed" in header
    assert gemma.startswith("gemma3-270m ") and "25% [9%–53%] (n 12)" in gemma and "2 of 20" in gemma
    assert smol.startswith("smollm2-135m ") and "83% [55%–95%] (n 12)" in smol and "0 of 18" in smol
    assert smol.split()[1] == "31.0" and gemma.split()[1] == "15.5"  # the mean decode rate, its interval beside
    whole = unwrapped(closing)
    verdict = next(line for line in whole if line.startswith("verdict: "))
    assert verdict == ("verdict: smollm2-135m dominates gemma3-270m (faster decode, better answers; equivalent on time "
                       "to first token)")  # analysis.host's words, each name by its label
    decode, ttft, answers = whole[whole.index(verdict) + 1:whole.index(verdict) + 4]
    assert decode.startswith("  decode speed: smollm2-135m faster — decode rate 2.00× [2.00×–2.00×] the other's on the same "
                             "6 prompts") and "per task" not in decode  # each task's evidence is the report's
    assert ttft.startswith("  time to first token: equivalent within ±10% — ")
    assert answers.startswith("  answers, item by item: smollm2-135m 83% vs gemma3-270m 25% on the same 12 items: "
                              "+58 [+24, +76] pp, McNemar p = ")
    # the per-task table went to a file, keyed back to the full names
    task_file = root / "studies" / "glance" / run_summary.TASK_TABLE
    assert f"per task: {task_file} (3 tasks" in " ".join(out.split())
    text = task_file.read_text(encoding="utf-8")
    assert names(GEMMA) in text and names(SMOL) in text and "arithmetic" in text and "reasoning" in text


def unwrapped(lines: list[str]) -> list[str]:
    """The terminal's lines with each wrapped one (its rows after the first indented by four) made whole again."""
    whole: list[str] = []
    for line in lines:
        if line.startswith("    ") and whole:
            whole[-1] += " " + line.strip()
        else:
            whole.append(line)
    return whole


def test_a_verdict_word_is_explained_where_it_is_shown(study_output):
    out, _ = study_output
    closing = unwrapped(out[out.index("per task: "):].splitlines())
    heading = next(i for i, line in enumerate(closing) if line.startswith("thresholds"))
    key = closing[heading + 1]  # the words explained on the line under the heading, before any is used
    assert key == "  (SWAP: all thresholds pass · VERIFY: none fails, some unmeasured or undecided · WAIT: a threshold " \
                  "fails)"
    gemma = next(line for line in closing if line.startswith("  gemma3-270m: "))
    # the value with its 95 % interval beside the threshold, and the word the analysis gives: 20 tok/s lies inside
    # Gemma's interval, so that threshold is undecided at this n (analysis.decisions' THRESHOLD RULE), not a FAIL
    assert gemma == ("  gemma3-270m: VERIFY — decode 15.5 [9.6–21.4] vs ≥20 tok/s undecided at this n · TTFT 50 "
                     "[50–50] vs ≤500 ms PASS · entity recall ≥0.5 not measured")
    smol = next(line for line in closing if line.startswith("  smollm2-135m: "))
    assert smol.startswith("  smollm2-135m: VERIFY — ") and smol.endswith(" · entity recall ≥0.5 not measured")


def test_short_labels_name_each_by_what_differs():
    two = [names(GEMMA), names(SMOL)]
    assert short_labels(two) == {names(GEMMA): "gemma3-270m", names(SMOL): "smollm2-135m"}
    assert shared_part(two) == "llama-cpp-python · demo · local-cpu"
    grid = ["m-1 · s · demo,n_threads=1 · h", "m-1 · s · demo,n_threads=2 · h"]
    assert list(short_labels(grid).values()) == ["n_threads=1", "n_threads=2"]  # the settings all share said once
    qwen = ["qwen3-4b-a · s · h", "qwen3-4b-b · s · h"]  # two words would not tell them apart: a third
    assert list(short_labels(qwen).values()) == ["qwen3-4b-a", "qwen3-4b-b"]
    base = ["tiny-model · s · h", "tiny-model · s · slow · h"]  # a grid point beside its base: both keep the model
    assert list(short_labels(base).values()) == ["tiny-model", "tiny-model · slow"]
    assert short_labels([names(GEMMA)]) == {names(GEMMA): "gemma3-270m"}
    assert key_lines(short_labels(two))[1] == f"smollm2-135m  = {names(SMOL)}"


def test_a_long_line_wraps_under_its_head():
    long = "verdict: " + " ".join(["word"] * 60)
    rows = fit(long)
    assert len(rows) > 1 and all(len(r) <= WIDTH for r in rows) and rows[1].startswith("    word")
    assert " ".join(r.strip() for r in rows) == long


def test_a_plain_run_names_its_deployment_once_and_ends_on_one_screen(tmp_path, monkeypatch, capsys):
    """`frontier-bench run PARAMS`: the same closing summary for one deployment (no pair, so no verdict line), the
    per-task table beside the deployment's suite folders."""
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(tmp_path / "outputs"))
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(deployment(SMOL)), encoding="utf-8")
    write_synthetic_run(tmp_path / "synthetic", with_media=False)
    write_graded(tmp_path / "synthetic", [True] * 10 + [False] * 2)

    def run_notebooks(params, params_path, notebooks, fresh, progress=True):
        dirs = []
        for suite in notebooks:
            folder = params.suite_dir(suite)
            shutil.copytree(tmp_path / "synthetic" / SYN_HOST / SYN_MODEL / suite, folder)
            manifest = json.loads((folder / "manifest.json").read_text())
            (folder / "manifest.json").write_text(json.dumps({**manifest,
                                                              "params": json.loads(params.model_dump_json())}))
            dirs.append(folder)
        return {}, dirs

    monkeypatch.setattr(cli, "run_notebooks", run_notebooks)
    assert cli.main(["run", str(path), "--only", "text,quality", "--no-paper", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.count(names(SMOL)) == 1 and f"  smollm2-135m  = {names(SMOL)}" in out
    closing = out[out.index("per task: "):].splitlines()
    assert len(closing) <= 35 and all(len(line) <= WIDTH for line in out.splitlines())
    assert next(line for line in closing if line.startswith("smollm2-135m ")).split()[1] == "31.0"
    assert not any(line.startswith("verdict") for line in closing)  # one deployment: nothing to compare it with
    assert (tmp_path / "outputs" / "local-cpu" / "smollm2-135m-instruct-q4_1_demo" / run_summary.TASK_TABLE).is_file()
