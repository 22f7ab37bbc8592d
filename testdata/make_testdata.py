#!/usr/bin/env python3
"""Deterministic generator of every media file under testdata/ (image/, audio/, video/).

    python testdata/make_testdata.py            # (re)write every file
    python testdata/make_testdata.py --only image,video
    python testdata/make_testdata.py --check    # compare what would be written with the committed files

The files are committed, so users never run this; it documents exactly how each file was made and the
answer each one encodes. The answers are repeated in testdata/tasks/*.yaml (tests/config/test_task_media.py
checks both agree).

- Images are drawn with plain Pillow primitives (no fonts, no anti-aliasing): the pixels are identical
  on every machine. PNG only: the her-os report saw BMP input silently fail.
- The tone WAV is synthesised with numpy: byte-identical on every machine.
- Speech WAVs need espeak-ng at generation time only (apt-get install espeak-ng); they are resampled
  to 16 kHz mono 16-bit PCM with PyAV's resampler.
- The video is an 8 s 1280x720 H.264 MP4 written with PyAV (libx264, one thread). Second k (0..7)
  shows the seven-segment digit k+1 on its own background colour, so a 1 fps sample reads 1..8.
  The encoder's bytes may differ across FFmpeg builds; frame count, size, duration and colours do not.
"""

from __future__ import annotations

import argparse
import io
import math
import shutil
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from benchlib.config.speech_set import SAMPLE_RATE, resample_to_16k, wav_bytes  # 16 kHz mono 16-bit, as the speech set

HERE = Path(__file__).resolve().parent
IMAGE_DIR = HERE / "image"
AUDIO_DIR = HERE / "audio"
VIDEO_DIR = HERE / "video"

# ----------------------------------------------------------------------------------------------
# Colour grids (her-os report: a 10x10 grid with exactly 5 coloured cells, all 5 found = pass).
# Rows and columns are numbered 1..10 from the top-left corner.
# ----------------------------------------------------------------------------------------------
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (220, 20, 20),
    "blue": (20, 60, 220),
    "green": (20, 160, 40),
    "yellow": (250, 210, 0),
    "purple": (130, 40, 170),
    "orange": (250, 130, 0),
}
GRID_SIZE = 10
GRID_CELL_PX = 40
GRID_LINE = (150, 150, 150)
# name -> [(color, row, col)]; each grid has five distinct colours in distinct rows and columns.
GRIDS: dict[str, list[tuple[str, int, int]]] = {
    "grid_a": [("red", 2, 3), ("blue", 4, 8), ("green", 6, 5), ("yellow", 8, 1), ("purple", 10, 9)],
    "grid_b": [("orange", 1, 6), ("green", 3, 2), ("red", 5, 10), ("blue", 7, 4), ("yellow", 9, 7)],
    "grid_c": [("blue", 1, 1), ("purple", 2, 9), ("red", 5, 5), ("green", 8, 7), ("orange", 10, 2)],
}


def grid_image(cells: list[tuple[str, int, int]]) -> Image.Image:
    """A 400x400 white grid of 10x10 cells with gray lines; the listed cells filled with their colour."""
    side = GRID_SIZE * GRID_CELL_PX
    img = Image.new("RGB", (side, side), "white")
    draw = ImageDraw.Draw(img)
    for color, row, col in cells:
        x0, y0 = (col - 1) * GRID_CELL_PX, (row - 1) * GRID_CELL_PX
        draw.rectangle([x0, y0, x0 + GRID_CELL_PX - 1, y0 + GRID_CELL_PX - 1], fill=PALETTE[color])
    for i in range(GRID_SIZE + 1):
        pos = min(i * GRID_CELL_PX, side - 1)
        draw.line([(pos, 0), (pos, side - 1)], fill=GRID_LINE, width=2)
        draw.line([(0, pos), (side - 1, pos)], fill=GRID_LINE, width=2)
    return img


# ----------------------------------------------------------------------------------------------
# Scenes for image description (paper: "all models correctly identify the main scene elements").
# ----------------------------------------------------------------------------------------------
SCENES = {
    # sky, yellow sun with rays, green ground, red ball, blue box, brown tree with a green crown
    "scene_park": "light-blue sky, yellow sun top-left, green grass, red ball, blue box, tree",
    # white background: red circle, blue square, yellow triangle, green rectangle (ground bar)
    "scene_shapes": "white background, red circle, blue square, yellow triangle, green bar",
}


def scene_park() -> Image.Image:
    w, h = 640, 480
    img = Image.new("RGB", (w, h), (150, 205, 250))  # sky
    d = ImageDraw.Draw(img)
    d.rectangle([0, 320, w - 1, h - 1], fill=(40, 170, 60))  # grass
    # sun with rays (top-left)
    cx, cy, r = 110, 95, 50
    for k in range(12):
        a = 2 * math.pi * k / 12
        d.line([(cx + math.cos(a) * (r + 10), cy + math.sin(a) * (r + 10)),
                (cx + math.cos(a) * (r + 35), cy + math.sin(a) * (r + 35))], fill=(250, 210, 0), width=6)
    d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=(250, 215, 0))
    # tree (right)
    d.rectangle([505, 230, 535, 340], fill=(120, 70, 30))
    d.ellipse([455, 130, 585, 260], fill=(20, 120, 35))
    # red ball and blue box on the grass
    d.ellipse([150, 330, 250, 430], fill=(220, 20, 20))
    d.rectangle([320, 300, 430, 410], fill=(20, 60, 220))
    return img


def scene_shapes() -> Image.Image:
    w, h = 640, 480
    img = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(img)
    d.ellipse([60, 120, 220, 280], fill=(220, 20, 20))  # red circle
    d.rectangle([250, 120, 410, 280], fill=(20, 60, 220))  # blue square
    d.polygon([(520, 110), (600, 280), (440, 280)], fill=(250, 210, 0))  # yellow triangle
    d.rectangle([0, 400, w - 1, h - 1], fill=(20, 160, 40))  # green bar along the bottom
    return img


SCENE_DRAWERS = {"scene_park": scene_park, "scene_shapes": scene_shapes}

# ----------------------------------------------------------------------------------------------
# Audio. Transcripts avoid digits and proper names so the word error rate measures hearing, not
# spelling conventions. 16 kHz mono 16-bit PCM.
# ----------------------------------------------------------------------------------------------
SPEECH: dict[str, str] = {
    "speech_umbrella": "Tomorrow will be cloudy in the morning and rainy in the evening, so please carry an umbrella.",
    "speech_grocery": "We need to buy milk, eggs, bread and fresh tomatoes from the market before it closes.",
    "speech_library": "The library closes early on Sunday because the staff are attending a training workshop.",
    "speech_train": "The train to the city leaves from platform three at half past seven in the morning.",
    "speech_garden": "My grandmother planted roses and sunflowers in the garden behind the old house.",
    "speech_meeting": "The team meeting has been moved to Thursday afternoon in the small conference room.",
}
ESPEAK_VOICE = "en-us"
ESPEAK_WPM = 150
TONE_NAME = "tone_440hz"
TONE_SECONDS = 4.0


def tone_samples() -> np.ndarray:
    """A steady 440 Hz tone with a soft 880 Hz overtone and 50 ms fades: no speech at all."""
    t = np.arange(int(TONE_SECONDS * SAMPLE_RATE)) / SAMPLE_RATE
    signal = 0.30 * np.sin(2 * np.pi * 440 * t) + 0.08 * np.sin(2 * np.pi * 880 * t)
    fade = int(0.05 * SAMPLE_RATE)
    envelope = np.ones_like(t)
    envelope[:fade] = np.linspace(0, 1, fade)
    envelope[-fade:] = np.linspace(1, 0, fade)
    return np.round(signal * envelope * 32767).astype("<i2")


def speech_samples(text: str) -> np.ndarray:
    """Speak `text` with espeak-ng, resample to 16 kHz, pad 0.3 s of silence on each side."""
    exe = shutil.which("espeak-ng")
    if not exe:
        raise SystemExit("espeak-ng is needed to regenerate speech (apt-get install espeak-ng); "
                         "the committed WAVs need nothing")
    out = subprocess.run([exe, "-v", ESPEAK_VOICE, "-s", str(ESPEAK_WPM), "--stdout", text],
                         check=True, capture_output=True).stdout
    with wave.open(io.BytesIO(out)) as w:
        rate, width, channels = w.getframerate(), w.getsampwidth(), w.getnchannels()
        raw = w.readframes(w.getnframes())
    if width != 2 or channels != 1:
        raise SystemExit(f"unexpected espeak-ng output: {channels} channels, {width * 8}-bit")
    pcm = np.frombuffer(raw, dtype="<i2")
    pcm16 = resample_to_16k(pcm, rate) if rate != SAMPLE_RATE else pcm
    pad = np.zeros(int(0.3 * SAMPLE_RATE), dtype="<i2")
    return np.concatenate([pad, pcm16, pad])


# ----------------------------------------------------------------------------------------------
# Video: 8 s, 1280x720, 24 fps; second k shows digit k+1 on VIDEO_SECONDS[k]'s background colour.
# ----------------------------------------------------------------------------------------------
VIDEO_NAME = "digits_8s_720p"
VIDEO_W, VIDEO_H, VIDEO_FPS, VIDEO_SECONDS_LONG = 1280, 720, 24, 8
VIDEO_SECONDS: list[tuple[int, str, tuple[int, int, int]]] = [
    (1, "red", (210, 30, 30)),
    (2, "orange", (245, 140, 20)),
    (3, "yellow", (245, 220, 40)),
    (4, "green", (40, 160, 60)),
    (5, "blue", (40, 80, 210)),
    (6, "purple", (120, 50, 160)),
    (7, "pink", (245, 140, 190)),
    (8, "gray", (128, 128, 128)),
]
# Seven-segment layout: segments a (top), b (top right), c (bottom right), d (bottom),
# e (bottom left), f (top left), g (middle).
SEGMENTS = {
    0: "abcdef", 1: "bc", 2: "abdeg", 3: "abcdg", 4: "bcfg",
    5: "acdfg", 6: "acdefg", 7: "abc", 8: "abcdefg", 9: "abcdfg",
}


def _segment_polygon(seg: str, x: int, y: int, w: int, h: int, t: int) -> list[tuple[int, int]]:
    """A bevelled bar for one segment of a digit whose box is (x, y, w, h), bar thickness t."""
    half = t // 2
    gap = max(2, t // 8)
    mid = y + h // 2

    def horizontal(cy: int) -> list[tuple[int, int]]:
        x0, x1 = x + half + gap, x + w - half - gap
        return [(x0, cy), (x0 + half, cy - half), (x1 - half, cy - half), (x1, cy),
                (x1 - half, cy + half), (x0 + half, cy + half)]

    def vertical(cx: int, y0: int, y1: int) -> list[tuple[int, int]]:
        y0, y1 = y0 + gap, y1 - gap
        return [(cx, y0), (cx + half, y0 + half), (cx + half, y1 - half), (cx, y1),
                (cx - half, y1 - half), (cx - half, y0 + half)]

    top, bottom = y + half, y + h - half
    left, right = x + half, x + w - half
    return {
        "a": lambda: horizontal(top),
        "g": lambda: horizontal(mid),
        "d": lambda: horizontal(bottom),
        "f": lambda: vertical(left, top, mid),
        "b": lambda: vertical(right, top, mid),
        "e": lambda: vertical(left, mid, bottom),
        "c": lambda: vertical(right, mid, bottom),
    }[seg]()


def draw_digit(draw: ImageDraw.ImageDraw, digit: int, box: tuple[int, int, int, int], fill) -> None:
    x, y, w, h = box
    t = max(6, w // 5)
    for seg in SEGMENTS[digit]:
        draw.polygon(_segment_polygon(seg, x, y, w, h, t), fill=fill)


def video_frame(second: int) -> Image.Image:
    """The picture shown throughout second `second` (0-based) of the video."""
    digit, _name, rgb = VIDEO_SECONDS[second]
    img = Image.new("RGB", (VIDEO_W, VIDEO_H), rgb)
    luminance = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]
    ink = (0, 0, 0) if luminance > 140 else (255, 255, 255)
    dw, dh = 260, 460
    draw_digit(ImageDraw.Draw(img), digit, ((VIDEO_W - dw) // 2, (VIDEO_H - dh) // 2, dw, dh), ink)
    return img


def write_video(path: Path) -> None:
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", format="mp4", options={"movflags": "+faststart"}) as container:
        stream = container.add_stream("libx264", rate=VIDEO_FPS)
        stream.width, stream.height, stream.pix_fmt = VIDEO_W, VIDEO_H, "yuv420p"
        stream.options = {"crf": "30", "preset": "medium", "threads": "1", "g": str(VIDEO_FPS),
                          "x264-params": "threads=1:lookahead-threads=1"}
        stream.codec_context.thread_count = 1
        for second in range(VIDEO_SECONDS_LONG):
            picture = video_frame(second)
            for k in range(VIDEO_FPS):
                frame = av.VideoFrame.from_image(picture).reformat(format="yuv420p")
                frame.pts = second * VIDEO_FPS + k
                for packet in stream.encode(frame):
                    container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


# ----------------------------------------------------------------------------------------------
# Entry point
# ----------------------------------------------------------------------------------------------
def png_bytes(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def all_images() -> dict[str, Image.Image]:
    images = {name: grid_image(cells) for name, cells in GRIDS.items()}
    images.update({name: draw() for name, draw in SCENE_DRAWERS.items()})
    return images


def generate(only: set[str], check: bool = False) -> list[str]:
    """Write (or, with check, compare) the selected kinds; returns one line per file."""
    lines: list[str] = []

    def emit(path: Path, data: bytes) -> None:
        rel = path.relative_to(HERE)
        if check:
            same = path.is_file() and path.read_bytes() == data
            lines.append(f"{'same' if same else 'DIFFERS'} {rel}")
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        lines.append(f"wrote {rel} ({len(data):,} bytes)")

    if "image" in only:
        for name, img in all_images().items():
            emit(IMAGE_DIR / f"{name}.png", png_bytes(img))
    if "audio" in only:
        emit(AUDIO_DIR / f"{TONE_NAME}.wav", wav_bytes(tone_samples()))
        for name, text in SPEECH.items():
            emit(AUDIO_DIR / f"{name}.wav", wav_bytes(speech_samples(text)))
    if "video" in only:
        target = VIDEO_DIR / f"{VIDEO_NAME}.mp4"
        if check:
            lines.append(f"skip {target.relative_to(HERE)} (encoder output is build-dependent; "
                         "tests/config/test_task_media.py checks its frames)")
        else:
            write_video(target)
            lines.append(f"wrote {target.relative_to(HERE)} ({target.stat().st_size:,} bytes)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="image,audio,video", help="comma-separated: image,audio,video")
    parser.add_argument("--check", action="store_true", help="compare with committed files, write nothing")
    args = parser.parse_args(argv)
    only = {k.strip() for k in args.only.split(",") if k.strip()}
    unknown = only - {"image", "audio", "video"}
    if unknown:
        parser.error(f"unknown kind(s): {', '.join(sorted(unknown))}")
    lines = generate(only, check=args.check)
    print("\n".join(lines))
    return 1 if any(line.startswith("DIFFERS") for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
