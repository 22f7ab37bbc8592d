"""Each documented command after the others, in any order, never stops on another's folder and never overwrites it
(issues 46.1 and 43.7): a study with overrides, the ladder (its source rung is the params file unchanged), a plain
run of the file, the study again and a second study that only raises run.graded_items — all exit 0 through the real
command line, against the fake server. Same identity → same folder → resume (nothing sent twice); other settings →
a folder of their own, which the paper names apart ("model · server · settings · host") and `compare` reads.

The ladder's rungs are made by llama.cpp's quantizer from the embedded GGUF; here `ladder.prepare` hands back two
rungs of the fake server's model instead (the source, unchanged, and a q2_k rung), so what is tested is the folder
logic every command shares, not the quantizer (tests/integration/test_ladder_end_to_end.py runs that)."""

from __future__ import annotations

from pathlib import Path

import yaml

from benchlib import cli
from benchlib.analysis import compare
from benchlib.config.params import load_params
from benchlib.paper.runs import load_runs
from benchlib.records.rows import read_requests
from benchlib.suites import ladder

HOST = "folder-host"


def write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def rows(outputs: Path) -> dict[str, int]:
    """Requests recorded per deployment folder (text suite)."""
    return {csv.parent.parent.name: len(read_requests(csv)) for csv in sorted(outputs.glob(f"{HOST}/*/text/requests.csv"))}


def test_study_ladder_run_and_a_second_study_each_find_their_folder(fake_server, tmp_path, monkeypatch, capsys):
    outputs = tmp_path / "outputs"
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(outputs))
    params = write(tmp_path / "embedded-like.yaml", {
        "host": {"name": HOST},
        "server": {"kind": "openai", "base_url": fake_server.url, "model": "fake-q4_k_m", "software": "fake",
                   "quantization": "q4_k_m", "extra_body": {"fake": {"ttft": 0.01, "itl": 0.005, "tokens": 4}}},
        "run": {"warmups": 0, "repeats": 2, "max_tokens": 16, "timeout_s": 10, "notebooks": ["text"]},
        "tasks": ["basic_qa"],
        "telemetry": {"idle_baseline_s": 0, "loaded_baseline_s": 0, "power_hz": 5}})
    quick = write(tmp_path / "quick.yaml", {"name": "quick", "notebooks": ["text"], "settle": {"timeout_s": 2},
                                            "overrides": {"run": {"graded_items": 3}},
                                            "deployments": [{"params": str(params)}]})
    fuller = write(tmp_path / "fuller.yaml", {"name": "fuller", "notebooks": ["text"], "settle": {"timeout_s": 2},
                                              "overrides": {"run": {"graded_items": 20}},
                                              "deployments": [{"params": str(params)}]})
    base = load_params(params)

    def rungs(p, types, progress=print):
        low = p.model_copy(update={"server": p.server.model_copy(update={"model": "fake-q2_k",
                                                                         "quantization": "q2_k"})})
        return [("q2_k", low), ("q4_k_m", ladder.rung_params(p, "q4_k_m", Path("unused.gguf"), "", 0.6))]
    monkeypatch.setattr(ladder, "prepare", rungs)

    def command(*args: str) -> str:
        code = cli.main([*args, "--no-paper", "--quiet"])
        out = capsys.readouterr()
        assert code == 0, f"{' '.join(args)} exited {code}:\n{out.out[-3000:]}\n{out.err[-3000:]}"
        assert "different params" not in out.out + out.err and "error:" not in out.err, out.err[-2000:]
        return out.out

    command("study", str(quick))
    after_study = rows(outputs)
    assert after_study == {"fake-q4_k_m_graded_items_3": 2}

    command("ladder", str(params))
    after_ladder = rows(outputs)
    assert after_ladder == {**after_study, "fake-q2_k": 2, "fake-q4_k_m": 2}, "each rung in a folder of its own"

    run = command("run", str(params))
    assert rows(outputs) == after_ladder, "the plain run is the source rung's run: it resumed, nothing sent again"
    assert base.identity() in run

    again = command("study", str(quick))
    assert "done earlier" in again and rows(outputs) == after_ladder

    command("study", str(fuller))
    final = rows(outputs)
    assert final == {**after_ladder, "fake-q4_k_m_graded_items_20": 2}

    names = set(load_runs(outputs).meta["system"])
    assert names == {"fake-q4_k_m · fake · folder-host", "fake-q2_k · fake · folder-host",
                     "fake-q4_k_m · fake · graded_items=3 · folder-host",
                     "fake-q4_k_m · fake · graded_items=20 · folder-host"}
    assert set(compare.read_root(str(outputs))["deployment"]) == names  # compare names them as the paper does
