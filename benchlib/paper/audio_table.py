"""The paper's audio table: transcription by an LLM with native audio input against a dedicated speech model, the
choice seed 001 weighs (Gemma 4 E2B's own audio path against her-os's speech-to-text pipeline in front of a text
model). The seed's rows are 000 §4–5's Transcription (ASR) cells for Phi-4 Multimodal and Gemma 4 E2B (decode
tok/s, end-to-end latency, the pass/fail summary: no WER, no clip lengths, so no real-time factor); ours are every
deployment of ours that ran the audio suite's transcription task, measured on the same scale whatever its kind
(benchlib.analysis.transcription): corpus WER over the five clips, the worst clip's WER, mean time to the whole
transcript, the real-time factor (wall s ÷ audio s), and what it made of the 440 Hz tone."""

from __future__ import annotations

import math

import pandas as pd

from benchlib.analysis.transcription import clip_rows, corpus_rows
from benchlib.config.formatting import fmt
from benchlib.config.identity import Deployment
from benchlib.config.tasks import load_tasks
from benchlib.paper.format import Table
from benchlib.paper.runs import Runs, seed_rows, source_label
from benchlib.published import reference

SEED_TASK = "Transcription (ASR)"
TASK = "transcription"
TONE_TASK = "ambiguous_audio"
SPEECH = "speech model behind /v1/audio/transcriptions"
COLUMNS = ["deployment", "kind", "source", "clips", "corpus_wer", "max_clip_wer", "e2e_mean_s", "rtf_mean",
           "decode_tps", "accuracy", "tone"]


def _seed_rows(ref: pd.DataFrame) -> list[dict]:
    cells = seed_rows(ref, "000") if len(ref) else ref
    if not len(cells):
        return []
    cells = cells[(cells["task"] == SEED_TASK) & (cells["model"] != "") & cells["value"].notna()]
    reported = reference.paper_accuracy(ref)
    rows = []
    for (model, host), group in cells.groupby(["model", "host"], sort=False):
        value = {metric: float(hit["value"].iloc[0]) for metric, hit in group.groupby("metric")}
        name = Deployment.published(model, host)
        correct = reported[(reported["system"] == name) & (reported["task"] == TASK)]
        rows.append({"deployment": name, "kind": "LLM with native audio input",
                     "source": source_label(str(group["source"].iloc[0])), "clips": math.nan,
                     "corpus_wer": math.nan, "max_clip_wer": math.nan,
                     "e2e_mean_s": value.get("e2e_latency", math.nan), "rtf_mean": math.nan,
                     "decode_tps": value.get("decode_tps", math.nan),
                     "accuracy": "reported correct" if len(correct) and correct["passed"].iloc[0] == 1 else "",
                     "tone": ""})
    return rows


def _run_rows(runs: Runs) -> list[dict]:
    if runs.empty or runs.requests.empty:
        return []
    tasks = load_tasks().values()
    corpus = corpus_rows(clip_rows(runs.requests, tasks))
    if corpus.empty:
        return []
    weights = dict(zip(runs.meta["system"], runs.meta["weights"])) if "weights" in runs.meta else {}
    rows = []
    for row in corpus[corpus["task"] == TASK].itertuples():
        name = runs.name(row.host, row.model)
        speech = row.request_kind == "transcription"
        tone = corpus[(corpus["task"] == TONE_TASK) & (corpus["host"] == row.host) & (corpus["model"] == row.model)]
        random = weights.get(name) == "random"
        rows.append({"deployment": name,
                     "kind": SPEECH if speech else "LLM with native audio input",
                     "source": "ours (this run)", "clips": row.clips_ok,
                     "corpus_wer": math.nan if random else row.corpus_wer,
                     "max_clip_wer": math.nan if random else row.max_clip_wer, "e2e_mean_s": row.e2e_mean_s,
                     "rtf_mean": row.rtf_mean, "decode_tps": math.nan,
                     "accuracy": "random weights: not scored" if random else
                     f"WER {fmt(row.corpus_wer, '.3f')} over {fmt(row.reference_words, '.0f')} words",
                     "tone": _tone(tone.iloc[0]) if len(tone) and speech else ""})
    return rows


def _tone(row: pd.Series) -> str:
    """What a speech model made of the tone: its clips with an empty transcript."""
    if row["clips_ok"] == 0:
        return "not transcribed"
    return f"{int(row['empty_transcripts'])}/{int(row['clips_ok'])} empty transcripts"


def audio_transcription_table(ref: pd.DataFrame, runs: Runs) -> Table | None:
    """The seed's transcription rows and ours, one row per deployment; None when neither exists."""
    rows = _seed_rows(ref) + _run_rows(runs)
    if not rows:
        return None
    data = pd.DataFrame(rows, columns=COLUMNS)
    display = pd.DataFrame({
        "deployment": data["deployment"], "kind": data["kind"], "source": data["source"],
        "clips": [fmt(v, ".0f") for v in data["clips"]],
        "corpus WER": [fmt(v, ".3f") for v in data["corpus_wer"]],
        "worst clip WER": [fmt(v, ".3f") for v in data["max_clip_wer"]],
        "e2e s (mean)": [fmt(v, ".2f") for v in data["e2e_mean_s"]],
        "real-time factor": [fmt(v, ".2f") for v in data["rtf_mean"]],
        "decode tok/s": [fmt(v, ".1f") for v in data["decode_tps"]],
        "accuracy": data["accuracy"], "440 Hz tone": data["tone"]})
    return Table("audio_transcription", "Transcription: LLMs with native audio (000 §4–5) beside our deployments, a "
                 "dedicated speech model among them", data, display,
                 caption="The published rows are the paper's Transcription (ASR) cells: decode tok/s, end-to-end "
                         "latency and its pass/fail summary, on an RTX 3090; it gives no WER and no clip lengths, so "
                         "no real-time factor. Our rows come from the audio suite's five speech clips (16 kHz, "
                         "5.7–6.7 s) on our hardware: corpus WER = word errors summed over the clips ÷ reference words "
                         "(after case and punctuation are normalised), e2e from the request on the wire to the whole "
                         "transcript, real-time factor = e2e ÷ the clip's seconds (below 1: faster than it plays). A "
                         "speech model sends no tokens to count; an LLM's transcript is scored the same way. 440 Hz "
                         "tone: what a speech model returned for a clip without speech.")
