"""Installs into .venv take their own lock: two makes that find the install out of date at once install once — the
second waits, naming the first's PID, then finds the stamp fresh — and a first install that fails leaves the second to
install. The Makefile runs in a scratch tree with its install command stubbed through its make variable
(INSTALL_RUN), so nothing is downloaded or compiled; the real recipes are checked as shell syntax."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from benchlib.config.paths import PROJECT_ROOT

STAMP = ".venv/.installed-run"


STARTED: list[subprocess.Popen] = []


@pytest.fixture
def tree(tmp_path: Path):
    """A scratch project: the Makefile, the files its install stamps depend on, and a .venv whose python exists;
    whatever a test leaves waiting is released and stopped after it."""
    shutil.copy(PROJECT_ROOT / "Makefile", tmp_path / "Makefile")
    shutil.copy(PROJECT_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "requirements").mkdir()
    for name in ("run.txt", "test.txt", "llama.txt", "models.txt", "speech.txt"):
        (tmp_path / "requirements" / name).write_text("# stub lock\n")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)
    yield tmp_path
    (tmp_path / "release").touch()
    while STARTED:
        child = STARTED.pop()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def make(tree: Path, *args: str, out=subprocess.PIPE) -> subprocess.Popen:
    child = subprocess.Popen(["make", "--no-print-directory", "-C", str(tree), *args], stdout=out,
                             stderr=subprocess.STDOUT, text=True)
    STARTED.append(child)
    return child


def wait_for(check, what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def stub(tree: Path) -> str:
    """An install that records its shell's PID, waits (at most a minute) until the test releases it, and fails once
    if told to."""
    log, release, fail = tree / "installs", tree / "release", tree / "fail-once"
    return (f"INSTALL_RUN=echo $$$$ >> {log}; n=0; while [ ! -e {release} ] && [ $$n -lt 1200 ]; do sleep 0.05; "
            f"n=$$((n+1)); done; "
            f"if [ -e {fail} ]; then rm {fail}; false; fi")


def installs(tree: Path) -> list[str]:
    path = tree / "installs"
    return path.read_text().split() if path.is_file() else []


def second_waits(tree: Path) -> tuple[subprocess.Popen, subprocess.Popen, Path]:
    """Start one make, and a second once the first is installing; return both once the second says it waits."""
    first = make(tree, STAMP, stub(tree))
    wait_for(lambda: installs(tree), "the first install to start")
    out = tree / "second.out"
    with out.open("w") as sink:
        second = make(tree, STAMP, stub(tree), out=sink)
    wait_for(lambda: "another install is running" in out.read_text() or second.poll() is not None,
             "the second make to wait")
    return first, second, out


def test_two_makes_on_a_stale_install_install_once_and_the_second_says_why_it_waits(tree):
    first, second, out = second_waits(tree)
    holder = installs(tree)[0]
    assert f"another install is running (pid {holder}); waiting" in out.read_text()
    assert second.poll() is None, "the second make went on while the first was installing"
    (tree / "release").touch()
    first_out, _ = first.communicate(timeout=60)
    assert first.returncode == 0, first_out
    assert second.wait(timeout=60) == 0, out.read_text()
    assert installs(tree) == [holder], "the second make installed again"
    assert f"{STAMP} is up to date (installed meanwhile); nothing to install" in out.read_text()
    stamp = (tree / STAMP).stat().st_mtime
    assert all(stamp >= (tree / p).stat().st_mtime for p in ("pyproject.toml", "requirements/run.txt"))


def test_when_the_first_install_fails_the_waiting_one_installs(tree):
    (tree / "fail-once").touch()
    first, second, out = second_waits(tree)
    (tree / "release").touch()
    first.communicate(timeout=60)
    assert first.returncode != 0, "the stub's failure did not fail the first make"
    assert second.wait(timeout=60) == 0, out.read_text()
    assert len(installs(tree)) == 2 and "nothing to install" not in out.read_text()
    assert (tree / STAMP).is_file()


def test_the_locked_install_recipes_are_valid_shell(tree):
    """The real recipes (venv, run, test, speech installs) as make would run them, checked by sh -n."""
    done = subprocess.run(["make", "--no-print-directory", "-C", str(tree), "-n", "-B", ".venv/bin/python", STAMP,
                           ".venv/.installed-test", ".venv/.installed-speech"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert sum("flock -n 9" in line for line in lines) == 4, done.stdout
    for line in lines:
        checked = subprocess.run(["sh", "-n", "-c", line], capture_output=True, text=True, timeout=10)
        assert checked.returncode == 0, f"{checked.stderr}\n{line}"


NOISE = "WARNING: Location 'file:///opt/wheels' is ignored: it is either a non-existing path or lacks a specific scheme."


def test_an_install_prints_one_line_and_its_noise_goes_to_the_log(tree):
    """pip's and setuptools' warnings land in .venv/install.log; the terminal gets what is installed, the log's path
    and the time it took, on one line."""
    noisy = f"INSTALL_RUN=for i in 1 2 3; do echo \"{NOISE}\"; done; echo 'setuptools: SetuptoolsDeprecationWarning' >&2"
    done = make(tree, STAMP, noisy)
    out, _ = done.communicate(timeout=60)
    assert done.returncode == 0, out
    lines = out.splitlines()
    assert len(lines) == 1, out
    assert lines[0].startswith("Installing from requirements/run.txt")
    assert "(log: .venv/install.log)" in lines[0] and lines[0].endswith(" s")
    assert len(lines[0]) <= 120, lines[0]  # the terminal's lines fit 120 characters
    log = (tree / ".venv" / "install.log").read_text()
    assert log.count(NOISE) == 3 and "SetuptoolsDeprecationWarning" in log


def test_a_failed_install_prints_the_end_of_its_log_and_fails(tree):
    failing = "INSTALL_RUN=echo 'ERROR: No matching distribution found for nothing-here==1.0'; exit 3"
    done = make(tree, STAMP, failing)
    out, _ = done.communicate(timeout=60)
    assert done.returncode != 0, out
    assert "install failed (exit 3); the last lines of .venv/install.log:" in out
    assert "ERROR: No matching distribution found for nothing-here==1.0" in out
    assert not (tree / STAMP).exists()
