"""The generated graded sets' cost: how long each declared set (testdata/tasks/vision_graded.yaml, audio_graded.yaml)
takes to make in full on this machine — its items (the seeded draws), then every picture drawn or every sentence
spoken — into an empty cache folder, and again once cached; and, with `--whisper N`, the speech deployment
(params/embedded-whisper.yaml: Whisper tiny.en) on the first N spoken sentences, as the audio suite runs them.

Per set it prints

    items      the pool's size
    first_s    items + media from nothing (what the first vision or audio suite on a machine spends on it)
    cached_s   the same call again: the items' JSON read, the media folder found complete
    load_s     of first_s, the items alone (what loading the task files costs before any media)
    MB         the media on disk

Everything goes to a scratch folder (FRONTIER_BENCH_CACHE and FRONTIER_BENCH_OUTPUTS point there), never the cache
or outputs/.

    nice .venv/bin/python bench/generated_sets.py
    nice .venv/bin/python bench/generated_sets.py --whisper 40
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchlib.config.graded import GENERATORS, GradedSource, graded_variants, media_folder, render_media  # noqa: E402
from benchlib.config.params import validate  # noqa: E402
from benchlib.config.paths import tasks_dir  # noqa: E402
from benchlib.config.tasks import load_tasks  # noqa: E402
from benchlib.suites.runner import TRANSCRIPTION_CSV, run_suite  # noqa: E402


def timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def declared() -> list[tuple[str, str, GradedSource]]:
    """(name, suite, graded block) of every generated set, read from the task files without loading them (loading
    would make the items before they are timed)."""
    out = []
    for path in sorted(tasks_dir().glob("*.yaml")):
        for task in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            if (task.get("graded") or {}).get("source") in GENERATORS:
                out.append((task["name"], task["suite"], GradedSource.model_validate(task["graded"])))
    return out


def make_sets() -> pd.DataFrame:
    rows = []
    for name, suite, spec in declared():
        load_s = timed(lambda: graded_variants(spec))
        first_s = load_s + timed(lambda: render_media(spec))
        cached_s = timed(lambda: (graded_variants(spec), render_media(spec)))
        size = sum(p.stat().st_size for p in media_folder(spec).iterdir())
        rows.append({"set": name, "suite": suite, "items": spec.size, "first_s": round(first_s, 2),
                     "cached_s": round(cached_s, 3), "load_s": round(load_s, 2), "MB": round(size / 1e6, 1)})
    return pd.DataFrame(rows)


def whisper(items: int) -> None:
    data = yaml.safe_load((ROOT / "params" / "embedded-whisper.yaml").read_text())
    data["host"]["name"] = "bench-generated-sets"
    data["run"] = {**data["run"], "warmups": 1, "graded_items": items, "notebooks": ["audio"]}
    data["telemetry"] = {"enabled": False, "idle_baseline_s": 0, "loaded_baseline_s": 0}
    data["tasks"] = ["spoken_sentences"]
    result = run_suite(validate(data, source="embedded-whisper.yaml"), "audio", progress=False)
    rows = result.requests[~result.requests["is_warmup"].astype(bool)]
    clips = pd.read_csv(result.out_dir / TRANSCRIPTION_CSV)
    corpus = clips[(clips["scope"] == "corpus") & (clips["task"] == "spoken_sentences")].iloc[0]
    passed = int(rows["passed"].astype(bool).sum())
    print(f"\nWhisper tiny.en on the first {len(rows)} spoken sentences: {passed} exact (WER 0), corpus WER "
          f"{corpus['corpus_wer']:.3f} ({int(corpus['errors'])} errors in {int(corpus['reference_words'])} words), "
          f"e2e median {rows['e2e_s'].astype(float).median():.2f} s, RTF mean {corpus['rtf_mean']:.2f}")
    wrong = clips[(clips["scope"] == "clip") & (clips["task"] == "spoken_sentences") & (clips["errors"] > 0)]
    expected = {v.id: v.expected for v in load_tasks()["spoken_sentences"].variants}
    for clip in wrong.head(5).itertuples():
        print(f"  {clip.variant}: said {expected[clip.variant]!r}, heard {clip.transcript!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--whisper", type=int, default=0, metavar="N",
                        help="also transcribe the first N spoken sentences with Whisper tiny.en (speech extra)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["FRONTIER_BENCH_CACHE"] = str(Path(scratch) / "cache")
        os.environ["FRONTIER_BENCH_OUTPUTS"] = str(Path(scratch) / "outputs")
        print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs, load average "
              f"{os.getloadavg()[0]:.1f}")
        table = make_sets()
        print(table.to_string(index=False))
        print(f"all sets: first {table['first_s'].sum():.1f} s, cached {table['cached_s'].sum():.2f} s, "
              f"{table['MB'].sum():.0f} MB")
        if args.whisper:
            whisper(args.whisper)


if __name__ == "__main__":
    main()
