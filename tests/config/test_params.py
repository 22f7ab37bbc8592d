"""Params validation: bad input gives one line naming the file and the key."""

from __future__ import annotations

import ast
import re
import time

import papermill
import pytest
import yaml

from benchlib.cli import main as cli_main
from benchlib.config.params import NOTEBOOK_ORDER, SECTIONS, ParamsError, load_params, validate
from benchlib.config.paths import NOTEBOOKS_DIR, PARAMS_DIR
from benchlib.config.tasks import load_pass, load_tasks, under_load


def write(tmp_path, data, name="run.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


BASE = {"host": {"name": "h"}, "server": {"kind": "openai", "base_url": "http://127.0.0.1:8000/v1", "model": "m"}}


def test_every_params_file_validates():
    files = sorted(PARAMS_DIR.glob("*.yaml"))
    assert files, "params/ has no files"
    for path in files:
        params = load_params(path)
        assert params.host.name and params.server.model


def test_unknown_key_names_file_key_and_suggestion(tmp_path):
    path = write(tmp_path, {**BASE, "run": {"repeat": 3}})
    with pytest.raises(ParamsError) as err:
        load_params(path)
    message = str(err.value)
    assert str(path) in message and "run.repeat" in message and "did you mean 'repeats'" in message
    assert "\n" not in message


def test_wrong_type_names_key(tmp_path):
    path = write(tmp_path, {**BASE, "run": {"max_tokens": "many"}})
    with pytest.raises(ParamsError, match=r"run\.max_tokens: .*integer.*'many'"):
        load_params(path)


def test_missing_file_and_invalid_yaml(tmp_path):
    with pytest.raises(ParamsError, match="nope.yaml: params file not found"):
        load_params(tmp_path / "nope.yaml")
    path = write(tmp_path, "host: {name: h\nserver: [", "bad.yaml")
    with pytest.raises(ParamsError, match=r"bad.yaml: invalid YAML at line \d+"):
        load_params(path)


def test_bad_url_missing_url_and_secret_in_env_name(tmp_path):
    bad_url = {**BASE, "server": {**BASE["server"], "base_url": "localhost:8000"}}
    with pytest.raises(ParamsError, match=r"server.base_url: not an http\(s\) URL"):
        load_params(write(tmp_path, bad_url))
    no_url = {**BASE, "server": {"kind": "ollama", "model": "m"}}
    with pytest.raises(ParamsError, match="base_url is required for kind 'ollama'"):
        load_params(write(tmp_path, no_url))
    leaked = {**BASE, "server": {**BASE["server"], "api_key_env": "sk-abc123-def"}}
    with pytest.raises(ParamsError, match="server.api_key_env: must be the NAME of an environment variable"):
        load_params(write(tmp_path, leaked))


@pytest.mark.parametrize("url, says", [("s3://user:hunter2@bucket/runs", "a password"),
                                        ("s3://bucket/runs?secret_access_key=hunter2", "'secret_access_key' in its "
                                                                                      "query")])
def test_a_store_url_with_a_secret_is_refused_by_validate_in_one_line(tmp_path, capsys, url, says):
    """It passed `validate`, and `run` ended in a 24-line traceback: refused as base_url is, the secret unsaid."""
    path = write(tmp_path, {**BASE, "run": {"store": url}})
    with pytest.raises(ParamsError, match=f"run: store carries {says}") as caught:
        load_params(path)
    assert "hunter2" not in str(caught.value) and "\n" not in str(caught.value)
    assert cli_main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "store carries" in err and "hunter2" not in err
    user = load_params(write(tmp_path, {**BASE, "run": {"store": "sftp://me@host/runs?timeout=5"}}))
    assert user.run.store == "sftp://me@host/runs?timeout=5"  # a user name and options are no secret


def test_a_store_url_with_a_password_in_the_environment_is_refused_by_validate_and_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FRONTIER_BENCH_STORE", "sftp://me:hunter2@host/runs")
    path = write(tmp_path, BASE)
    for command in ("validate", "run"):
        assert cli_main([command, str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "carries a password" in err and "hunter2" not in err, err


def test_unknown_task_named(tmp_path):
    with pytest.raises(ParamsError, match="unknown task 'reasonin' \\(did you mean 'reasoning'\\?\\)"):
        load_params(write(tmp_path, {**BASE, "tasks": ["basic_qa", "reasonin"]}))


def test_identity_changes_with_params_but_not_with_embedded_port():
    params = load_params(PARAMS_DIR / "embedded.yaml")
    other = params.model_copy(deep=True)
    other.run.repeats += 1
    assert params.identity() != other.identity()
    moved = params.model_copy(deep=True)
    moved.server.base_url = "http://127.0.0.1:5555/v1"
    assert params.identity() == moved.identity()


SUITE_NOTEBOOKS = [NOTEBOOKS_DIR / f"{name}.ipynb" for name in NOTEBOOK_ORDER]


def test_params_keys_are_notebook_parameters():
    """Every section a params file may carry is a parameter each suite notebook declares."""
    notebooks = SUITE_NOTEBOOKS
    assert all(n.is_file() for n in notebooks)
    declared_sets = {}
    for notebook in notebooks:
        declared = set(papermill.inspect_notebook(str(notebook)))
        declared_sets[notebook.name] = declared
        assert set(SECTIONS) <= declared, f"{notebook.name} lacks {set(SECTIONS) - declared}"
        for path in PARAMS_DIR.glob("*.yaml"):
            keys = set(yaml.safe_load(path.read_text()))
            assert keys <= declared, f"{path.name} keys {keys - declared} not parameters of {notebook.name}"
    assert len({frozenset(v) for v in declared_sets.values()}) == 1, "suite notebooks declare different parameters"


def test_notebook_defaults_are_the_embedded_params_file():
    """A notebook run by hand in Jupyter measures the same run (same run id) as `make run`."""
    embedded = yaml.safe_load((PARAMS_DIR / "embedded.yaml").read_text())
    for notebook in SUITE_NOTEBOOKS:
        declared = papermill.inspect_notebook(str(notebook))
        for section in SECTIONS:
            default = ast.literal_eval(declared[section]["default"])
            assert default == embedded.get(section, [] if section == "tasks" else {}), (notebook.name, section)


def test_ipv6_hosts_are_urls_and_ports_must_exist(tmp_path):
    ipv6 = load_params(write(tmp_path, {**BASE, "server": {**BASE["server"], "base_url": "http://[::1]:8000/v1"}}))
    assert ipv6.server.base_url == "http://[::1]:8000/v1"
    for url in ("http://127.0.0.1:99999/v1", "http://127.0.0.1:0/v1"):
        with pytest.raises(ParamsError, match=r"server\.base_url: port out of range .*\(1–65535\)"):
            load_params(write(tmp_path, {**BASE, "server": {**BASE["server"], "base_url": url}}))


@pytest.mark.parametrize("section,key,value,message", [
    ("run", "timeout_s", float("inf"), "run.timeout_s: Input should be a finite number"),
    ("run", "temperature", float("nan"), "run.temperature: Input should be a finite number"),
    ("run", "repeats", 1_000_000_000, "run.repeats: Input should be less than or equal to 100000"),
    ("run", "max_tokens", 10**9, "run.max_tokens: Input should be less than or equal to 1048576"),
    ("sweep", "concurrency", [1, 10**9], "sweep.concurrency: every value must be <= 16777216"),
])
def test_non_finite_and_absurd_numbers_get_one_line(tmp_path, section, key, value, message):
    with pytest.raises(ParamsError) as error:
        load_params(write(tmp_path, {**BASE, section: {key: value}}))
    assert str(error.value).startswith(f"{tmp_path / 'run.yaml'}: {message}") and "\n" not in str(error.value)


def test_non_utf8_and_alias_bombs_are_refused_fast(tmp_path):
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"host: {name: caf\xe9}\n")
    with pytest.raises(ParamsError, match=r"not UTF-8 text \(byte 0xe9 at offset 16\); save the file as UTF-8"):
        load_params(latin)
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'] + [
        f"{chr(97 + i)}: &{chr(97 + i)} [{','.join(['*' + chr(96 + i)] * 9)}]" for i in range(1, 9)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("host: {name: h}\nserver: {kind: openai, base_url: 'http://127.0.0.1:8000/v1', model: m, "
                    "extra_body: {x: {" + ", ".join(levels) + "}}}\n")
    assert len(bomb.read_bytes()) < 800  # nine levels of nine: 387 million strings if expanded
    started = time.monotonic()
    with pytest.raises(ParamsError, match="aliases \\(\\*name\\) are not allowed in a params file"):
        load_params(bomb)
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("text, message", [
    ("host: {name: h}\nserver: {kind: openai, base_url: 'http://127.0.0.1:8000/v1', model: m, extra_body: "
     + "{a: " * 5000 + "1" + "}" * 5000 + "}\n", r"invalid YAML at line 2, column \d+: nested deeper than 32 levels"),
    ("host: {name: h}\nserver: {kind: openai, base_url: 'http://127.0.0.1:8000/v1', model: m}\nrun: {seed: "
     + "9" * 5000 + "}\n", r"invalid YAML at line 3, column 13: an integer of 5000 characters \(at most 63 bits"),
    ("host: {name: h}\nserver: {kind: openai, base_url: 'http://127.0.0.1:8000/v1', model: m}\nrun: {repeats: 2}\n"
     "run: {repeats: 5}\n", r"invalid YAML at line 4, column 1: duplicate key 'run' \(first at line 3; the last"),
    ("host: {name: h, name: i}\nserver: {kind: openai, base_url: 'http://127.0.0.1:8000/v1', model: m}\n",
     r"invalid YAML at line 1, column 17: duplicate key 'name'"),
    ("host: {name: h}\nserver: {kind: openai, base_url: 'http://127.0.0.1:8000/v1', model: m}\nrun: {warmups: true}\n",
     r"run\.warmups: a boolean \(true/false\) is not a number: write the number \(got True\)"),
    ("host: {name: h}\nserver: {kind: openai, base_url: 'http://127.0.0.1:8000/v1', model: m}\n"
     "sweep: {concurrency: [1, true]}\n", r"sweep\.concurrency: a boolean \(true/false\) is not a number"),
    ("host: {name: " + "h" * 300 + "}\nserver: {kind: openai, base_url: 'http://127.0.0.1:8000/v1', model: m}\n",
     r"host\.name: String should have at most 120 characters"),
    ("host: {name: h}\nserver: {kind: openai, base_url: 'http://127.0.0.1:8000/v1', model: " + "m" * 150
     + ", variant: " + "v" * 100 + "}\n", r"server: model and variant make a folder name of 251 characters"),
])
def test_hostile_params_are_one_line_errors(tmp_path, text, message):
    """Nesting 5,000 deep, a 5,000-digit integer, a key given twice, a boolean for a number and names too long for
    a folder: each a one-line ParamsError naming the file, never a traceback, a silent pick or a later ENAMETOOLONG."""
    with pytest.raises(ParamsError) as error:
        load_params(write(tmp_path, text))
    assert "\n" not in str(error.value) and str(error.value).startswith(str(tmp_path / "run.yaml"))
    assert re.search(message, str(error.value)), str(error.value)


def test_notebook_parameters_are_bounded_like_a_file():
    """The same bounds hold for sections given as data (papermill parameters, a study's inline blocks)."""
    deep: dict = {}
    inner = deep
    for _ in range(5000):
        inner["a"] = {}
        inner = inner["a"]
    base = {"host": {"name": "h"}, "server": {"kind": "openai", "base_url": "http://127.0.0.1:8000/v1", "model": "m"}}
    with pytest.raises(ParamsError, match=r"^nb: server\.extra_body\.a\.a\.…: nested deeper than 32 levels$"):
        validate({**base, "server": {**base["server"], "extra_body": deep}}, source="nb")
    with pytest.raises(ParamsError, match=r"^nb: run\.seed: integer too large \(16610 bits; at most 63 and a sign\)$"):
        validate({**base, "run": {"seed": 10**5000}}, source="nb")
    assert validate({**base, "run": {"seed": 2**63 - 1, "warmups": 0}}).run.seed == 2**63 - 1


def test_a_load_pass_is_named_after_its_set_and_read_back():
    task = load_tasks()["arithmetic"]
    loaded = under_load(task, 4)
    assert loaded.name == "arithmetic@c4" and loaded.variants == task.variants and loaded.checker == task.checker
    assert load_pass("arithmetic@c4") == ("arithmetic", 4) and load_pass("arithmetic") == ("arithmetic", 1)
    assert load_pass("x@cy") == ("x@cy", 1)


def test_a_real_server_runs_every_graded_item_and_only_the_cpu_demo_is_reduced():
    """Every params file for a real server (the paper's RTX 3090 and GB10 deployments, the vLLM, SGLang, Ollama and
    llama-server examples) runs the quality suite on the full pools, several items at once where the server takes
    them; the embedded CPU demo sends a few of each set, one at a time."""
    tasks = load_tasks()
    graded = {name: len(task.variants) for name, task in tasks.items() if task.graded is not None}
    # own-server.yaml is the README's first walk on a CPU: a reduced run by design, and it says so
    real = [p for p in sorted(PARAMS_DIR.glob("*.yaml")) if not p.name.startswith("embedded")
            and p.name != "own-server.yaml"]
    assert {p.name for p in real} >= {"rtx3090-gemma4-e2b-vllm.yaml", "rtx3090-phi4-multimodal-vllm.yaml",
                                      "gb10-qwen3.5-4b-vllm.yaml", "gb10-gemma4-26b-a4b-nvfp4-vllm.yaml",
                                      "vllm-example.yaml", "sglang-example.yaml", "ollama-example.yaml",
                                      "llamacpp-server-example.yaml"}
    for path in real:
        params = load_params(path)
        assert params.server.kind != "embedded", path.name
        assert "quality" in params.run.notebooks, path.name
        assert {name: params.run.graded_count(name, pool) for name, pool in graded.items()} == graded, path.name
    assert load_params(PARAMS_DIR / "vllm-example.yaml").graded_in_flight() == 16  # vLLM batches what arrives
    assert load_params(PARAMS_DIR / "ollama-example.yaml").graded_in_flight() == 1  # OLLAMA_NUM_PARALLEL=1
    demos = [p for p in sorted(PARAMS_DIR.glob("embedded*.yaml")) if "quality" in load_params(p).run.notebooks]
    assert len(demos) >= 4
    for path in demos:
        params = load_params(path)
        sent = sum(params.run.graded_count(name, pool) for name, pool in graded.items())
        assert 0 < sent < sum(graded.values()) and params.graded_in_flight() == 1, path.name


def test_graded_items_per_set_all_and_the_rest(tmp_path):
    run = validate({**BASE, "run": {"graded_items": {"arithmetic": 30, "humaneval": "all", "*": 2}}}).run
    assert run.graded_count("arithmetic", 200) == 30 and run.graded_count("humaneval", 164) == 164
    assert run.graded_count("word_sorting", 200) == 2
    assert validate({**BASE, "run": {"graded_items": {"arithmetic": 5}}}).run.graded_count("leg_counting", 200) == 0
    assert validate(BASE).run.graded_count("arithmetic", 200) == 200  # the default: the whole pool
    assert validate({**BASE, "run": {"graded_items": 500}}).run.graded_count("arithmetic", 200) == 200
    with pytest.raises(ParamsError, match=r"run.graded_items: 'arithmatic' is no graded set \(did you mean "
                                          r"'arithmetic'\?\)"):
        load_params(write(tmp_path, {**BASE, "run": {"graded_items": {"arithmatic": 5}}}))
    with pytest.raises(ParamsError, match=r"run.graded_items"):
        load_params(write(tmp_path, {**BASE, "run": {"graded_items": 0}}))


def test_a_pass_under_load_needs_a_first_pass_one_at_a_time(tmp_path):
    params = validate({**BASE, "run": {"graded_concurrency": 4}})
    assert params.graded_in_flight() == 1
    with pytest.raises(ParamsError, match=r"graded_concurrency 4 compares .* one at a time: leave graded_in_flight "
                                          r"unset \(or 1\), not 8"):
        load_params(write(tmp_path, {**BASE, "run": {"graded_concurrency": 4, "graded_in_flight": 8}}))
