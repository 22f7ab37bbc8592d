"""Transcription figures of a run: per clip, the word errors against the reference, the time to the answer and the
real-time factor; per deployment and task, the corpus WER (errors summed over clips ÷ reference words summed) and
the mean real-time factor. The same for a speech model behind /v1/audio/transcriptions and for an LLM given the
clip with a prompt (the audio suite's `transcription` task), so the two kinds of deployment compare on one scale.

Clips are the measured (non-warm-up) requests of tasks a speech model takes (Task.transcribes). A clip with a
reference transcript (the `wer` task, a generated speech set: scoring.graded.TRANSCRIPT_CHECKERS) gets its errors;
one without (the 440 Hz tone) only its word count: what a speech model makes of audio without speech is the
transcript itself, empty or not.
"""

from __future__ import annotations

import math
from typing import Iterable

import pandas as pd

from benchlib.config.tasks import Task
from benchlib.records.rows import STATUS_OK
from benchlib.records.schema import flag
from benchlib.scoring.answers import transcript_words, word_errors
from benchlib.scoring.graded import TRANSCRIPT_CHECKERS

# transcription.csv's columns; each line's comment is its columns' meaning (docs/columns.md is written from them; a
# column without one means what it means in requests.csv)
CLIP_COLUMNS = ["host", "model", "task", "variant", "repeat", "request_kind", "status", "audio_s", "e2e_s", "rtf",
                "reference_words", "errors", "wer",  # the reference's words; word errors against it; errors ÷ words
                "words", "transcript"]  # the transcript's words; the transcript
CORPUS_COLUMNS = ["host", "model", "task", "request_kind",
                  "clips", "clips_ok",  # clips sent; clips answered
                  "audio_s", "reference_words", "errors",  # summed over the task's clips
                  "corpus_wer",  # errors ÷ reference words over every clip
                  "mean_clip_wer", "max_clip_wer",  # the clips' WER, mean and worst
                  "e2e_mean_s", "rtf_mean", "rtf_max",  # mean e2e, s; the real-time factor, mean and worst
                  "empty_transcripts"]  # clips answered with no text (the tone: none heard)
SCOPE_COLUMNS = ["scope"]  # clip: a row per transcribed clip; corpus: a row per task, over all its clips


def _number(value: object) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan
    return number


def clip_rows(requests: pd.DataFrame, tasks: Iterable[Task]) -> pd.DataFrame:
    """One row per measured request of a transcribing task: its timing and, with a reference, its word errors."""
    by_name = {task.name: task for task in tasks if task.transcribes}
    if requests.empty or "task" not in requests or not by_name:
        return pd.DataFrame(columns=CLIP_COLUMNS)
    rows = []
    for row in requests.to_dict("records"):
        task = by_name.get(row.get("task"))
        if task is None or flag(row.get("is_warmup", False)):
            continue
        variant = next((v for v in task.variants if v.id == row.get("variant")), None)
        if variant is None:
            continue
        ok = row.get("status") == STATUS_OK
        text = str(row.get("response_text") or "") if ok else ""
        reference = variant.expected if task.checker in TRANSCRIPT_CHECKERS and isinstance(variant.expected, str) \
            else None
        errors, words = word_errors(reference, text) if ok and reference is not None else (math.nan, math.nan)
        rows.append({"host": row.get("host", ""), "model": row.get("model", ""), "task": task.name,
                     "variant": variant.id, "repeat": row.get("repeat", 0),
                     "request_kind": row["request_kind"] if isinstance(row.get("request_kind"), str) and
                     row["request_kind"] else "chat", "status": row.get("status", ""),
                     "audio_s": _number(row.get("audio_s")), "e2e_s": _number(row.get("e2e_s")) if ok else math.nan,
                     "rtf": _number(row.get("rtf")) if ok else math.nan, "reference_words": words, "errors": errors,
                     "wer": errors / words if words and words == words else math.nan,
                     "words": len(transcript_words(text).split()) if ok else math.nan, "transcript": text})
    return pd.DataFrame(rows, columns=CLIP_COLUMNS)


def corpus_rows(clips: pd.DataFrame) -> pd.DataFrame:
    """Per host × model × task: the corpus WER and the real-time factor over its clips (ok ones; failed ones
    counted in clips but in no figure)."""
    if clips.empty:
        return pd.DataFrame(columns=CORPUS_COLUMNS)
    rows = []
    for (host, model, task), group in clips.groupby(["host", "model", "task"], sort=False):
        ok = group[group["status"] == STATUS_OK]
        scored = ok[ok["reference_words"].notna()]
        words, errors = scored["reference_words"].sum(), scored["errors"].sum()
        kinds = sorted(set(group["request_kind"]))
        rows.append({"host": host, "model": model, "task": task, "request_kind": "+".join(kinds),
                     "clips": len(group), "clips_ok": len(ok), "audio_s": ok["audio_s"].sum(min_count=1),
                     "reference_words": words if len(scored) else math.nan,
                     "errors": errors if len(scored) else math.nan,
                     "corpus_wer": errors / words if len(scored) and words else math.nan,
                     "mean_clip_wer": scored["wer"].mean() if len(scored) else math.nan,
                     "max_clip_wer": scored["wer"].max() if len(scored) else math.nan,
                     "e2e_mean_s": ok["e2e_s"].mean() if len(ok) else math.nan,
                     "rtf_mean": ok["rtf"].mean() if ok["rtf"].notna().any() else math.nan,
                     "rtf_max": ok["rtf"].max() if ok["rtf"].notna().any() else math.nan,
                     "empty_transcripts": int((ok["words"] == 0).sum())})
    return pd.DataFrame(rows, columns=CORPUS_COLUMNS)


def transcription_frame(requests: pd.DataFrame, tasks: Iterable[Task]) -> pd.DataFrame:
    """transcription.csv: the clip rows (scope 'clip') followed by each task's corpus row (scope 'corpus')."""
    clips = clip_rows(requests, tasks)
    if clips.empty:
        return pd.DataFrame(columns=[*SCOPE_COLUMNS, *dict.fromkeys(CLIP_COLUMNS + CORPUS_COLUMNS)])
    corpus = corpus_rows(clips)
    return pd.concat([clips.assign(scope="clip"), corpus.assign(scope="corpus")], ignore_index=True) \
        .reindex(columns=[*SCOPE_COLUMNS, *dict.fromkeys(CLIP_COLUMNS + CORPUS_COLUMNS)])
