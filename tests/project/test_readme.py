"""The README is a front door whose every command runs: each command of its ```bash blocks is either run here as
written (the own-server walk and `compare`, against a fake server) or named in RUN_BY with the test or CI step that
runs it; every `make …` it mentions anywhere is a target the Makefile has; and it stays short enough to read, with
the demo, your own server and the results within its first 100 lines.

When the README's commands change, RUN_BY changes with them: a command it does not list fails
test_every_readme_command_is_run_by_a_test."""

from __future__ import annotations

import os
import re
import subprocess

import pandas as pd
import yaml

from benchlib import cli
from benchlib.config.paths import PROJECT_ROOT
from tests.fakes.servers import FakeServer

README = PROJECT_ROOT / "README.md"
THIS = "tests/project/test_readme.py"
OWN = "tests/integration/test_own_server.py"  # the walk with the real llama-cpp-python server, as the README has it

# Every command of the README's ```bash blocks → the tests that run it ("file::test"), or what runs it.
RUN_BY = {
    # make run = its install, then the default study: the recipe is held below (test_make_run_runs_the_default_study);
    # the study's file, and the real embedded server through papermill, are tested in make test. The whole command
    # (minutes of two real models) is what its README figure measures, not part of make test.
    "make run": [f"{THIS}::test_make_run_runs_the_default_study",
                 "tests/suites/test_study.py::test_the_shipped_studies_load",
                 "tests/integration/test_e2e.py::test_text_notebook_through_papermill_writes_real_rows"],
    "make test": [".ci/run", f"{THIS}::test_ci_runs_make_test"],
    ".venv/bin/frontier-bench models": [OWN + "::test_the_walk_answers_every_graded_item_and_names_smollm2s_weights"],
    '.venv/bin/python -m llama_cpp.server --model "$(.venv/bin/frontier-bench models --path smollm2)" --port 8011 '
    '> own-server.log 2>&1 &':
        [OWN + "::test_the_walk_answers_every_graded_item_and_names_smollm2s_weights"],
    "make run PARAMS=params/own-server.yaml": [OWN + "::test_the_walk_answers_every_graded_item_and_names_smollm2s_weights"],
    "make validate PARAMS=params/mine.yaml": [f"{THIS}::test_the_own_server_walk_runs_as_written"],
    "make run PARAMS=params/mine.yaml": [f"{THIS}::test_the_own_server_walk_runs_as_written"],
    "frontier-bench compare outputs-before/ outputs/ --fail-on decode_tps=5 --fail-on accuracy=3":
        [f"{THIS}::test_the_own_server_walk_runs_as_written"],
}


def readme() -> str:
    return README.read_text(encoding="utf-8")


def fenced_commands(text: str) -> list[str]:
    """The commands of the ```bash blocks, one per line (a line ending in a backslash joined to the next), without
    their comments."""
    out = []
    for block in re.findall(r"^```(?:bash|sh|shell)\n(.*?)^```", text, re.M | re.S):
        for line in re.sub(r"\\\n\s*", "", block).splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command and not command.startswith("#"):
                out.append(command)
    return out


def section(text: str, heading: str) -> str:
    start = text.index(f"## {heading}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def make(*args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """make in this checkout; `-o` keeps an install stamp as it is (a stale one would reinstall .venv)."""
    return subprocess.run(["make", "--no-print-directory", "-o", ".venv/.installed-run", *args], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_every_readme_command_is_run_by_a_test():
    commands = fenced_commands(readme())
    assert commands, "no ```bash block found"
    assert set(commands) == set(RUN_BY), ("README commands and RUN_BY disagree: "
                                          f"not in RUN_BY {sorted(set(commands) - set(RUN_BY))}, "
                                          f"no longer in the README {sorted(set(RUN_BY) - set(commands))}")
    for command, runners in RUN_BY.items():
        for runner in runners:
            path, _, name = runner.partition("::")
            assert (PROJECT_ROOT / path).is_file(), f"{command}: {path} does not exist"
            if name:
                assert re.search(rf"^def {name}\(", (PROJECT_ROOT / path).read_text(), re.M), \
                    f"{command}: {runner} does not exist"


def test_every_make_target_the_readme_names_exists():
    mentioned = sorted(set(re.findall(r"\bmake ([a-z][a-z-]*)", readme())))
    assert "run" in mentioned and "test" in mentioned
    for target in mentioned:
        done = make("-n", target)
        assert done.returncode == 0 and "No rule to make target" not in done.stderr, f"make {target}: {done.stderr}"


def test_make_run_runs_the_default_study():
    done = make("-n", "run")
    assert done.returncode == 0, done.stderr
    assert re.search(r"-m benchlib\.cli study params/studies/default\.yaml", done.stdout), done.stdout


def test_ci_runs_make_test():
    steps = [line.strip() for line in (PROJECT_ROOT / ".ci" / "run").read_text().splitlines()]
    assert "make test" in steps


def test_the_own_server_walk_runs_as_written(tmp_path):
    """The README's own-server walk, its params file as printed with the server's address swapped for a fake
    server's: `make validate`, then `make run` (text suite only, no paper), then the README's `compare` on the
    results (the same root twice: nothing moved, exit 0)."""
    walk = section(readme(), "Measure your own server")
    block = re.search(r"```yaml\n(.*?)```", walk, re.S).group(1)
    data = yaml.safe_load(block)
    server = FakeServer().start_thread()
    try:
        data["server"]["base_url"] = server.url
        params = tmp_path / "mine.yaml"
        params.write_text(yaml.safe_dump(data))
        outputs = tmp_path / "outputs"
        env = {**os.environ, "FRONTIER_BENCH_OUTPUTS": str(outputs)}
        commands = [c.replace("params/mine.yaml", str(params)) for c in fenced_commands(walk) if "mine.yaml" in c]
        assert [c.split()[:2] for c in commands] == [["make", "validate"], ["make", "run"]]
        validated = make(*commands[0].split()[1:], env=env)
        assert validated.returncode == 0, validated.stdout + validated.stderr
        ran = make(*commands[1].split()[1:], "ARGS=--only text --no-paper", env=env)
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    finally:
        server.stop()
    rows = pd.read_csv(outputs / data["host"]["name"] / data["server"]["model"] / "text" / "requests.csv")
    assert len(rows) and set(rows["status"]) == {"ok"}
    compare = next(c for c in fenced_commands(readme()) if c.startswith("frontier-bench compare"))
    args = compare.split()[1:]
    args[1:3] = [str(outputs), str(outputs)]
    assert cli.main([*args, "--out", str(tmp_path / "cmp")]) == 0  # the command's own entry point, in this process
    table = (tmp_path / "cmp" / "compare.md").read_text()
    assert "decode" in table and "my-model" in table


def test_the_readme_is_a_front_door():
    """Short enough to read (the hook stops at 300 lines), and within its first 100 lines: the demo, your own
    server, and where the results are."""
    text = readme()
    lines = text.splitlines()
    assert len(lines) <= 250, f"README.md is {len(lines)} lines: the manual belongs in docs/"
    head = "\n".join(lines[:100])
    assert "make run" in head and "## Measure your own server" in head and "## Where the results are" in head
    assert "outputs/<host>/<model>/<suite>/" in head
    links = re.findall(r"\]\(((?:docs|bench)/[^)#]+)", text)
    assert links
    for link in links:
        assert (PROJECT_ROOT / link).is_file(), f"README links to {link}, which does not exist"
