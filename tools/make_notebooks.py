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
    "quality": ("Quality suite", "The her-os field report's quality tests: entity extraction, tool calling, "
                "Kannada entities and a Kannada reply."),
    "vision": ("Vision suite", "Image description and the 10×10 color grid. A deployment without image input "
               "yields 'unsupported' rows with the reason."),
    "audio": ("Audio suite", "Transcription (WER), audio Q&A and the ambiguous synthetic tone (looping check)."),
    "video": ("Video suite", "An 8 s 1280×720 clip whose content changes each second, sent as sampled frames or "
              "as a video_url, per params."),
}


def _notebook(cells: list) -> nbformat.NotebookNode:
    notebook = new_notebook(cells=cells)
    for index, cell in enumerate(notebook.cells):  # stable ids: regenerating changes nothing that did not change
        cell["id"] = f"cell-{index:02d}"
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
        new_code_cell("suite_report.summary_table(result.summary)"),
        new_code_cell("suite_report.plot_suite(result.requests, result.out_dir);"),
        new_markdown_cell(f"## Evidence\n{EVIDENCE[suite]} One card per prompt variant (its first measured "
                          "request); warm-ups are left out."),
        new_code_cell("evidence.show(result.requests, SUITE);"),
    ]
    if suite == "audio":
        cells += [
            new_markdown_cell("## Transcription: WER per clip, corpus WER and real-time factor\nFrom "
                              "`transcription.csv`: each clip's word errors against its reference, the time to the "
                              "whole transcript and the real-time factor (e2e ÷ the clip's seconds), then each "
                              "task's corpus WER (errors summed over the clips ÷ reference words)."),
            new_code_cell("suite_report.transcription(result.out_dir)"),
        ]
    cells += [
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
    """The load suite: concurrency and prompt-length sweeps with the client self-check (benchlib.suites.load)."""
    parameters = new_code_cell(PARAMETERS)
    parameters.metadata["tags"] = ["parameters"]
    cells = [
        new_markdown_cell("# Load suite\n\nConcurrent requests and long prompts on one server start: a concurrency "
                          "sweep (`sweep.concurrency`, `sweep.requests_per_level`) and a prompt-length sweep "
                          "(`sweep.context_lengths`, clipped to the context window), both with `sweep.max_tokens` "
                          "completion tokens. Each request's row is appended to "
                          "`outputs/<host>/<model>/load/requests.csv` as it finishes; per-level figures go to "
                          "`sweep_concurrency.csv` and `sweep_context.csv`; rerunning resumes."),
        parameters,
        new_code_cell(DERIVED.format(suite="load") + "from benchlib.suites import load\nfrom benchlib.views import load_display\n"),
        new_markdown_cell("## Run\nWarm-ups first (recorded, flagged), then each concurrency level with at most that "
                          "many requests in flight, then one calibration request and one request per prompt length."),
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
        new_markdown_cell("## Client self-check\nEvent-loop lag (a 10 ms sleeper on the client's loop: how late it "
                          "woke) and client CPU per level. `client_bound` marks a level where the loop lag p99 "
                          "exceeded 5 ms or the client used more than half a core: there the client, not the server, "
                          "may have set the pace."),
        new_code_cell("load_display.health_table(result.concurrency, result.context)"),
        new_markdown_cell("## Summary per task, failures\n`max_concurrency_ok` and `max_context_ok` (the largest "
                          "level and prompt length that ran without a failure) feed the frontier."),
        new_code_cell("suite_report.summary_table(result.summary)"),
        new_code_cell("suite_report.failures(result.requests)"),
        new_markdown_cell("## Telemetry\nPower or CPU and memory over time; shaded spans are the measurement "
                          "windows (idle, loaded, concurrency, context)."),
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
