"""Write the suite notebooks from one template, so every suite declares the same parameters cell.

Run after changing the template: `.venv/bin/python tools/make_notebooks.py`. Notebooks are written
without outputs. Hand edits to a generated notebook are overwritten; change the template here.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

PARAMETERS = '''\
# Parameters: papermill injects a params file's sections here (`make run PARAMS=params/<file>.yaml`).
# These literal defaults are the embedded run (params/embedded.yaml); unset keys take benchlib's defaults.
params_file: str = "params/embedded.yaml"  # where the values came from (for messages and provenance)
host: dict = {"name": "local-cpu", "hardware": "this machine's CPU, no GPU"}  # machine under test
server: dict = {"kind": "embedded", "software": "llama-cpp-python", "model": "gemma3-270m-q4_k_m", "modalities": ["text"]}  # server + model
run: dict = {"warmups": 1, "repeats": 3, "max_tokens": 64, "timeout_s": 60}  # request settings
tasks: list = []  # task names to run; empty means every task of this suite
telemetry: dict = {"idle_baseline_s": 1.0, "loaded_baseline_s": 1.0}  # sensor sampling and baselines
sweep: dict = {}  # load/context sweep settings (load notebook)
thresholds: dict = {}  # decision-framework thresholds (paper notebook)
fresh: bool = False  # archive a run folder made from other params instead of refusing
'''

DERIVED = '''\
from benchlib import params as bench_params, report, runner

params = bench_params.from_notebook(params_file, host=host, server=server, run=run, tasks=tasks,
                                    telemetry=telemetry, sweep=sweep, thresholds=thresholds)
SUITE = "{suite}"
print(f"{{SUITE}} suite · {{params.server.model}} on {{params.host.name}} · run id {{params.identity()}}")
'''

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
        new_code_cell("report.summary_table(result.summary)"),
        new_code_cell("report.plot_suite(result.requests, result.out_dir);"),
        new_markdown_cell("## Failures, truncations and flags\nEvery fault is a row with its reason; flags mark "
                          "truncated answers (finish_reason = length), suspected prompt-cache hits, cold loads, "
                          "client/server rate disagreement and looping."),
        new_code_cell("report.failures(result.requests)"),
        new_markdown_cell("## Telemetry\nPower or CPU and memory over time; shaded spans are the measurement "
                          "windows (idle, loaded, one per task)."),
        new_code_cell("report.plot_telemetry(result.out_dir);\nresult.windows"),
    ]
    notebook = new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return notebook


def main() -> None:
    for suite in SUITES:
        nbformat.write(suite_notebook(suite), NOTEBOOKS / f"{suite}.ipynb")
        print(f"wrote notebooks/{suite}.ipynb")


if __name__ == "__main__":
    main()
