"""What the terminal shows after a run or a study: the per-task table, the graded sets' reduced note, the speed and
paired verdicts between deployments (each from the analysis layer), and the embedded models' GGUF files for the
own-server walk (`frontier-bench models`)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from benchlib.analysis import host, paired
from benchlib.analysis.deployments import deployment_overview
from benchlib.config.graded_run import reduced_note
from benchlib.config.params import ParamsError, load_params
from benchlib.config.paths import PROJECT_ROOT
from benchlib.measure.servers.llama_cpp import EmbeddedServerError, model_path_of
from benchlib.records.rows import read_requests
from benchlib.records.schema import read_csv
from benchlib.suites import quality_looks, study
from benchlib.suites.notebooks import shown_path
from benchlib.views.suite_report import console_table


def deployment_name_of(suite_dir: Path) -> str:
    """The deployment's name as every view gives it (model · server · settings · host), from the suite's manifest;
    the folders' names where it has none."""
    try:
        params = json.loads((suite_dir / "manifest.json").read_text(encoding="utf-8")).get("params") or {}
    except (OSError, ValueError):
        params = {}
    return study.recorded_deployment_name(params, suite_dir.parent.parent.name, suite_dir.parent.name)


def read_summaries(suite_dirs: list[Path]) -> pd.DataFrame:
    """The suites' summary.csv files, each row named by its deployment (model · server · settings · host)."""
    frames = []
    for suite_dir in suite_dirs:
        path = suite_dir / "summary.csv"
        if path.is_file():
            frames.append(read_csv(path, label=str(path)).assign(suite=suite_dir.name,
                                                                  model=deployment_name_of(suite_dir)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def paired_lines(suite_dirs: list[Path]) -> list[str]:
    """The paired verdicts (benchlib.analysis.paired.verdicts, ONE BASIS): per pair of deployments, the verdict on
    the graded sets (a compare plan's where one compared the pair), then the seeds' smoke tasks beside it."""
    frames = [read_requests(d / "requests.csv").assign(system=deployment_name_of(d))
              for d in suite_dirs if (d / "requests.csv").is_file()]
    items = paired.item_results(pd.concat(frames, ignore_index=True)) if frames else pd.DataFrame()
    table = paired.verdicts(items, quality_looks.compare_plans(suite_dirs, deployment_name_of)) if len(items) \
        else pd.DataFrame(columns=["basis"])
    lines = []
    for basis, heading in ((paired.GRADED, "the verdict, on the graded sets"),
                           (paired.SMOKE, "beside it, the seeds' smoke tasks (not part of the verdict)")):
        rows = table[table["basis"] == basis].drop(columns="basis").to_dict("records")
        if rows:
            lines += [f"{heading}:"] + ["  " + paired.Paired(**row).line() for row in rows]
    return lines


def speed_lines(suite_dirs: list[Path]) -> list[str]:
    """The speed verdicts (analysis.speed_verdicts, as "On this host" gives them): per pair of deployments, decode
    rate and time to first token on the text suite's prompts both answered, in one of the four words."""
    frames = [read_requests(d / "requests.csv").assign(system=deployment_name_of(d)) for d in suite_dirs
              if d.name == host.SPEED_SUITE and (d / "requests.csv").is_file()]
    if len(frames) < 2:
        return []
    margins = {deployment_name_of(d): _run_setting(d, "equivalence_margin") for d in suite_dirs}
    table = host.head_to_head(pd.concat(frames, ignore_index=True),
                              margins={k: v for k, v in margins.items() if isinstance(v, (int, float))})
    return [f"  {r.words}, {r.a} vs {r.b}: {r.note} — {r.rule}" for r in table.itertuples()
            if r.axis in ("decode_tps", "ttft_ms") and r.better != host.NOT_MEASURED]


def _run_setting(suite_dir: Path, name: str) -> object:
    """A run setting as the suite's manifest recorded its params (None where it holds none)."""
    try:
        params = json.loads((suite_dir / "manifest.json").read_text(encoding="utf-8")).get("params") or {}
    except (OSError, ValueError):
        return None
    return (params.get("run") or {}).get(name)


def reduced_lines(suite_dirs: list[Path]) -> list[str]:
    """'<deployment>: reduced: 33 of 964 items (run.graded_items)' for each quality run that planned fewer than the
    pools (a sequential quality plan's: 'sized by its compare plan …')."""
    lines = []
    for suite_dir in suite_dirs:
        try:
            plan = json.loads((suite_dir / "manifest.json").read_text(encoding="utf-8")).get("graded")
        except (OSError, ValueError):
            continue
        if reduced_note(plan):
            setting = "run.quality" if reduced_note(plan).startswith("sized") else "run.graded_items"
            lines.append(f"  {deployment_name_of(suite_dir)}: {reduced_note(plan)} ({setting})")
    return lines


def print_summary(suite_dirs: list[Path]) -> bool:
    """Per-task table on the terminal (and, for several deployments, one line each); returns whether any
    request succeeded."""
    summary = read_summaries(suite_dirs)
    if summary.empty:
        return False
    print("\n" + console_table(summary))
    reduced = reduced_lines(suite_dirs)  # the graded sets' accuracy above rests on part of their pools
    if reduced:
        print("\ngraded sets, part of their pools:\n" + "\n".join(reduced))
    if summary["model"].nunique() > 1:
        print("\nper deployment (speed from the text suite; accuracy on the graded sets and, apart, on the smoke "
              "tasks, 95 % Wilson):\n"
              + deployment_overview(summary).to_string(index=False))
        speeds = speed_lines(suite_dirs)
        if speeds:
            print("\nspeed, prompt by prompt on the prompts both deployments answered (ratio A ÷ B, paired sign-flip "
                  "test, tasks weighted equally; equivalent only within the margin, proven) —\n" + "\n".join(speeds))
        verdicts = paired_lines(suite_dirs)
        if verdicts:
            print("\npaired, item by item on the answers both deployments gave (Newcombe 95 % interval of the "
                  "difference, exact McNemar test) —\n" + "\n".join(verdicts))
    return bool(summary.get("n_ok", pd.Series(dtype=float)).fillna(0).sum() > 0)


def embedded_models() -> list[tuple[str, str, str]]:
    """(model name, GGUF path, params file) of each embedded llama.cpp deployment in params/, one per file."""
    found: dict[str, tuple[str, str, str]] = {}
    for path in sorted((PROJECT_ROOT / "params").glob("embedded*.yaml"), key=lambda p: (len(p.name), p.name)):
        try:
            params = load_params(path)
        except ParamsError:
            continue
        settings = params.server.embedded
        if params.server.kind != "embedded" or settings.engine == "whisper" or params.server.weights == "random":
            continue
        try:
            gguf = model_path_of(settings)
        except EmbeddedServerError:
            continue
        found.setdefault(gguf, (params.server.model, gguf, shown_path(str(path))))
    return list(found.values())
