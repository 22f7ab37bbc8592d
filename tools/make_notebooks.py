"""Write the suite notebooks from one template, so every suite declares the same parameters cell.

Run after changing the template: `.venv/bin/python tools/make_notebooks.py` (`make notebooks`); `--out DIR` writes
them elsewhere (tests/project/test_notebooks_generated.py compares that with notebooks/). Notebooks are written
without outputs. Hand edits to a generated notebook are overwritten; change the template here. notebooks/explore.ipynb
is not generated (it shares nothing with the suites).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import nbformat
import yaml
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

EMBEDDED = yaml.safe_load((NOTEBOOKS.parent / "params" / "embedded.yaml").read_text(encoding="utf-8"))
# (section, type, comment) in the order params files use; comments hold no '=' (papermill's parser skips such lines)
SECTIONS = [
    ("host", "dict", "machine under test"),
    ("server", "dict", "server kind, URL, model and what it accepts"),
    ("run", "dict", "request settings"),
    ("tasks", "list", "task names to run; empty means every task of this suite"),
    ("telemetry", "dict", "sensor sampling and baselines"),
    ("sweep", "dict", "load and context sweep settings (load notebook)"),
    ("thresholds", "dict", "decision-framework thresholds (paper notebook)"),
]


def parameters_cell() -> str:
    """Literal defaults equal to params/embedded.yaml, so a notebook run by hand has the run id of `make run`."""
    lines = ["# Parameters: papermill injects a params file's sections here (`make run PARAMS=params/<file>.yaml`).",
             "# These literal defaults are params/embedded.yaml; keys left out take benchlib's defaults.",
             'params_file: str = "params/embedded.yaml"  # where the values came from (for messages and provenance)']
    for name, kind, comment in SECTIONS:
        value = EMBEDDED.get(name, [] if kind == "list" else {})
        lines.append(f"{name}: {kind} = {value!r}  # {comment}")
    lines.append("fresh: bool = False  # archive a run folder made from other params instead of refusing")
    return "\n".join(lines) + "\n"


PARAMETERS = parameters_cell()

DERIVED = '''\
from benchlib.config.params import from_notebook
from benchlib.suites import runner
from benchlib.views import evidence, suite_report

params = from_notebook(params_file, host=host, server=server, run=run, tasks=tasks, telemetry=telemetry,
                       sweep=sweep, thresholds=thresholds)
SUITE = "{suite}"
print(f"{{SUITE}} suite · {{params.server.model}} on {{params.host.name}} · run id {{params.identity()}}")
'''
SUMMARY = "suite_report.summary_table(result.summary, result.out_dir)"  # the run folder: its TTFT/ITL caption

EVIDENCE = {
    "text": "Each prompt's expected answer beside what the model said, and the checker's verdict.",
    "quality": "Each tool call the model made against the call the task expected; the entity and Kannada "
               "answers beside their references.",
    "vision": "Each image as it was sent, with the model's answer and the checker's verdict.",
    "audio": "Each clip as a player, with the reference transcript, the model's transcript (hypothesis) and "
             "its word error rate.",
    "video": "The frames sent (sampled at 1 fps, as the runner sends them) with the model's answer.",
}

SUITES = {
    "text": ("Text suite", "The paper's five text tasks: basic Q&A, reasoning (snail puzzle), Python coding, "
             "multilingual, summarization."),
    "quality": ("Quality suite", "The her-os field report's quality tests (entity extraction, tool calling, "
                "Kannada entities and a Kannada reply), then the graded sets: items drawn from reasoning-gym's "
                "generators and HumanEval (`testdata/tasks/quality_graded.yaml`), each scored by its set's own "
                "scorer, HumanEval's code run against its own tests in a sandbox. With `run.graded_concurrency` "
                "above 1 every graded set is sent a second time with that many requests in flight, and the two "
                "passes are compared on the same items."),
    "vision": ("Vision suite", "Image description and the 10×10 color grid. A deployment without image input "
               "yields 'unsupported' rows with the reason."),
    "audio": ("Audio suite", "Transcription (WER), audio Q&A and the ambiguous synthetic tone (looping check)."),
    "video": ("Video suite", "An 8 s 1280×720 clip whose content changes each second, sent as sampled frames or "
              "as a video_url, per params."),
}


# Sections a suite shows after its evidence, before its failures: (cell type, source, pinned id or None). A pinned
# cell keeps that id (see _notebook): it was added after the notebook was first written.
EXTRA = {
    "quality": [
        ("markdown", "## Accuracy under load\nEach graded set answered one request at a time and again with "
                     "`run.graded_concurrency` in flight, compared item by item (paired interval, exact McNemar); "
                     "energy per correct answer where the task windows measured energy. Empty when "
                     "`run.graded_concurrency` is 1.", "1742331a"),
        ("code", "suite_report.accuracy_under_load(result.requests, result.summary)", "b3faae0d"),
        ("markdown", "## Items got wrong, per set\nEvery scored answer that did not pass: the expected answer, the "
                     "answer the checker read (a graded set's reading rule) and the raw answer.", "0cbd4e37"),
        ("code", "evidence.show_wrong(result.requests);", "5ec8a82b"),
    ],
    "audio": [
        ("markdown", "## Transcription: WER per clip, corpus WER and real-time factor\nFrom `transcription.csv`: "
                     "each clip's word errors against its reference, the time to the whole transcript and the "
                     "real-time factor (e2e ÷ the clip's seconds), then each task's corpus WER (errors summed over "
                     "the clips ÷ reference words).", None),
        ("code", "suite_report.transcription(result.out_dir)", None),
    ],
}


def _extra(suite: str) -> list:
    made = []
    for kind, source, pinned in EXTRA.get(suite, []):
        cell = new_markdown_cell(source) if kind == "markdown" else new_code_cell(source)
        made.append((pinned, cell) if pinned else cell)
    return made


def _notebook(cells: list) -> nbformat.NotebookNode:
    """Cells numbered cell-00, cell-01, … in order (stable ids: regenerating changes nothing that did not change),
    but for an (id, cell) pair: that cell keeps the id and takes no number, so adding a section in the middle of a
    notebook renames none of the cells after it."""
    numbered, placed = 0, []
    for cell in cells:
        if isinstance(cell, tuple):
            pinned, cell = cell
            cell["id"] = pinned
        else:
            cell["id"] = f"cell-{numbered:02d}"
            numbered += 1
        placed.append(cell)
    notebook = new_notebook(cells=placed)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return notebook


def suite_notebook(suite: str) -> nbformat.NotebookNode:
    title, blurb = SUITES[suite]
    parameters = new_code_cell(PARAMETERS)
    parameters.metadata["tags"] = ["parameters"]
    cells = [
        new_markdown_cell(f"# {title}\n\n{blurb}\n\nEach request's row is appended to "
                          f"`outputs/<host>/<model>/{suite}/requests.csv` as it finishes; rerunning resumes."),
        parameters,
        new_code_cell(DERIVED.format(suite=suite)),
        new_markdown_cell("## Run\nWarm-ups first (recorded, flagged), then every task's repeats over distinct "
                          "prompt variants."),
        new_code_cell("result = runner.run_suite(params, SUITE, fresh=fresh)\nprint(f'results in {result.out_dir}')"),
        new_markdown_cell("## Summary per task"),
        new_code_cell(SUMMARY),
        new_code_cell("suite_report.plot_suite(result.requests, result.out_dir);"),
        new_markdown_cell(f"## Evidence\n{EVIDENCE[suite]} One card per prompt variant (its first measured "
                          "request); warm-ups are left out."),
        new_code_cell("evidence.show(result.requests, SUITE);"),
        *_extra(suite),
        new_markdown_cell("## Failures, truncations and flags\nEvery fault is a row with its reason; flags mark "
                          "truncated answers (finish_reason = length), suspected prompt-cache hits, cold loads, "
                          "client/server rate disagreement and looping."),
        new_code_cell("suite_report.failures(result.requests)"),
        new_markdown_cell("## Telemetry\nPower or CPU and memory over time; shaded spans are the measurement "
                          "windows (idle, loaded, one per task)."),
        new_code_cell("suite_report.plot_telemetry(result.out_dir);\nresult.windows"),
    ]
    return _notebook(cells)


def load_notebook() -> nbformat.NotebookNode:
    """The load suite: concurrency, prompt-length and rate sweeps, the traffic-like workloads and the client
    self-check (benchlib.suites.load)."""
    parameters = new_code_cell(PARAMETERS)
    parameters.metadata["tags"] = ["parameters"]
    cells = [
        new_markdown_cell("# Load suite\n\nConcurrent requests, long prompts and open-loop arrivals on one server "
                          "start: a concurrency sweep (`sweep.concurrency`, `sweep.requests_per_level`), a "
                          "prompt-length sweep (`sweep.context_lengths`, clipped to the context window), both with "
                          "`sweep.max_tokens` completion tokens, and a rate sweep (`sweep.rate`, goodput under "
                          "`sweep.slo`). Each request's row is appended to `outputs/<host>/<model>/load/requests.csv` "
                          "as it finishes; per-level figures go to `sweep_concurrency.csv`, `sweep_context.csv` and "
                          "`sweep_rate.csv`; rerunning resumes.\n"),
        parameters,
        new_code_cell(DERIVED.format(suite="load") + "from benchlib.suites import load\nfrom benchlib.views import load_display\n"),
        new_markdown_cell("## Run\nWarm-ups first (recorded, flagged), then each concurrency level with at most that "
                          "many requests in flight, then one calibration request and one request per prompt length, then the "
                          "rate sweep's levels."),
        new_code_cell("result = load.run_load(params, fresh=fresh)\nprint(f'results in {result.out_dir}')\n"
                      "result.figures"),
        new_markdown_cell("## Concurrency: throughput vs latency\nAggregate output tok/s = completion tokens ÷ the "
                          "level's wall span. **Knee rule:** the knee is the first level whose next level adds less "
                          "than 10 % aggregate throughput while p50 TTFT or p50 e2e grows at least 1.5×; levels above "
                          "it are marked saturated. A server that answers one request at a time (the embedded "
                          "llama-cpp-python) shows queueing: flat throughput, growing TTFT."),
        new_code_cell("load_display.concurrency_table(result.concurrency)"),
        new_code_cell("load_display.plot_concurrency(result.concurrency, result.out_dir,\n"
                      "                        title=f'{params.server.model} on {params.host.name}');"),
        new_markdown_cell("## Prompt length: TTFT and prefill speed\nPrompts are fitted to the target length with "
                          "the server's own tokenizer where it has one (otherwise a calibrated chars-per-token "
                          "model); `prompt_tokens` is what the server reported, `token_error` its distance from the "
                          "target."),
        new_code_cell("load_display.context_table(result.context)"),
        new_code_cell("load_display.plot_context(result.context, result.out_dir,\n"
                      "                    title=f'{params.server.model} on {params.host.name}');"),
        new_markdown_cell("## Serving: the rate sweep\nOpen-loop arrivals, as a deployment meets its users "
                          "(`sweep.rate`): a synchronous level (one request at a time), a throughput level "
                          "(`max_concurrency` in flight), then `points` rates between them with seeded constant, "
                          "Poisson or gamma arrivals, each capped at `max_concurrency` in flight. Prompts have drawn "
                          "*server-counted* lengths (`prompt_tokens`), outputs drawn budgets (`output_tokens`), "
                          "optionally a shared prefix (`shared_prefix`). **Steady state:** a level's figures come "
                          "from the requests sent after the first `ramp_share` of its send period and before its last "
                          "send (ramp-up and drain left out); achieved rate and output tok/s are the work done inside "
                          "that window. **Goodput:** the share of those requests meeting every SLO in `sweep.slo`, "
                          "times the achieved rate. The scheduler's lag (intended vs actual send) is recorded per "
                          "request; a level whose lag p99 exceeds min(5 ms, half the mean gap) is `client_bound`.\n"),
        new_code_cell("print(load_display.slo_line(result.rate))\nload_display.rate_table(result.rate)\n"),
        new_code_cell("load_display.plot_rate(result.rate, result.out_dir,\n"
                      "               title=f'{params.server.model} on {params.host.name}');\n"),
        ("cell-workloads-md", new_markdown_cell(
            "## Workloads that look like traffic\nOff unless enabled in `sweep.workloads` "
            "(`params/studies/traffic.yaml` turns them on): **multi-turn** conversations whose every turn carries "
            "the whole history (the model's own answers included) after a think time, **shared prefixes** "
            "(k prefixes × m suffixes) and a **Mooncake trace** replayed at its scaled timestamps, each prompt built "
            "from its `hash_ids` blocks. Per workload: TTFT/ITL/e2e, goodput under `sweep.slo`, the cache-hit share "
            "the server reported (`cached_tokens` ÷ `prompt_tokens`; from `/metrics` where the server counts "
            "prefix-cache hits) and, for a replay, how late each request left after its planned offset "
            "(`workload_replay.csv`). The per-turn table sets turn 1 (a cold prefix) against the later, cached "
            "turns: median TTFT with its 95 % bootstrap interval and n.\n")),
        ("cell-workloads", new_code_cell("print(load_display.turns_line(result.turns))\n"
                                         "display(result.turns) if len(result.turns) else None\n"
                                         "load_display.workloads_table(result.workloads)")),
        new_markdown_cell("## Client self-check\nEvent-loop lag (a 10 ms sleeper on the client's loop: how late it "
                          "woke) and client CPU per level. `client_bound` marks a level where the loop lag p99 "
                          "exceeded 5 ms or the client used more than half a core: there the client, not the server, "
                          "may have set the pace."),
        new_code_cell("load_display.health_table(result.concurrency, result.context, result.rate)"),
        new_markdown_cell("## Summary per task, failures\n`max_concurrency_ok` and `max_context_ok` (the largest "
                          "level and prompt length that ran without a failure) feed the frontier."),
        new_code_cell(SUMMARY),
        new_code_cell("suite_report.failures(result.requests)"),
        new_markdown_cell("## Telemetry\nPower or CPU and memory over time; shaded spans are the measurement "
                          "windows (idle, loaded, concurrency, context, rate levels)."),
        new_code_cell("suite_report.plot_telemetry(result.out_dir);\nresult.windows"),
    ]
    return _notebook(cells)


def notebooks() -> dict[str, nbformat.NotebookNode]:
    """Every generated notebook by its file name."""
    return {**{f"{suite}.ipynb": suite_notebook(suite) for suite in SUITES}, "load.ipynb": load_notebook()}


def write(out_dir: Path = NOTEBOOKS) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, notebook in notebooks().items():
        nbformat.write(notebook, out_dir / name)
        written.append(out_dir / name)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=NOTEBOOKS, help="folder to write into (default: notebooks/)")
    for path in write(parser.parse_args(argv).out):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
