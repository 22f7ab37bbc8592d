"""The committed media match their generator, carry the answers the task files expect, and every task
file loads with its media present."""

from __future__ import annotations

import importlib.util
import wave
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from benchlib.config.paths import TESTDATA_DIR
from benchlib.config.tasks import load_tasks
from benchlib.scoring.checkers import CHECKERS


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("make_testdata", TESTDATA_DIR / "make_testdata.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tasks():
    return load_tasks()


def read_wav(path: Path) -> tuple[wave._wave_params, np.ndarray]:
    with wave.open(str(path)) as w:
        params = w.getparams()
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return params, samples


# ---------------------------------------------------------------------------------------------------------
# Images
# ---------------------------------------------------------------------------------------------------------
def test_images_are_pngs_with_pixels_identical_to_a_regeneration(gen):
    images = gen.all_images()
    assert set(images) == {"grid_a", "grid_b", "grid_c", "scene_park", "scene_shapes"}
    for name, regenerated in images.items():
        path = TESTDATA_DIR / "image" / f"{name}.png"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        committed = Image.open(path)
        assert committed.size == regenerated.size
        assert committed.convert("RGB").tobytes() == regenerated.convert("RGB").tobytes(), name


def test_grids_have_exactly_five_coloured_cells_where_the_task_file_says(gen, tasks):
    variants = {v.id: v for v in tasks["color_identification"].variants}
    assert set(variants) == set(gen.GRIDS)
    for name, cells in gen.GRIDS.items():
        img = Image.open(TESTDATA_DIR / "image" / f"{name}.png").convert("RGB")
        assert img.size == (400, 400)
        seen = {}
        for row in range(1, 11):
            for col in range(1, 11):
                pixel = img.getpixel(((col - 1) * 40 + 20, (row - 1) * 40 + 20))
                if pixel != (255, 255, 255):
                    seen[(row, col)] = pixel
        assert len(seen) == 5, name
        by_rgb = {rgb: color for color, rgb in gen.PALETTE.items()}
        found = {(by_rgb[rgb], row, col) for (row, col), rgb in seen.items()}
        assert found == set(cells), name
        expected = {(c["color"], c["row"], c["col"]) for c in variants[name].expected}
        assert expected == found, f"vision.yaml {name} disagrees with the image"


# ---------------------------------------------------------------------------------------------------------
# Audio
# ---------------------------------------------------------------------------------------------------------
def test_tone_wav_is_byte_identical_to_a_regeneration(gen):
    path = TESTDATA_DIR / "audio" / f"{gen.TONE_NAME}.wav"
    assert path.read_bytes() == gen.wav_bytes(gen.tone_samples())


def test_speech_wavs_are_16k_mono_and_not_silent(gen):
    assert len(gen.SPEECH) >= 5
    for name in list(gen.SPEECH) + [gen.TONE_NAME]:
        params, samples = read_wav(TESTDATA_DIR / "audio" / f"{name}.wav")
        assert (params.nchannels, params.sampwidth, params.framerate) == (1, 2, 16_000), name
        seconds = params.nframes / params.framerate
        assert 2.0 <= seconds <= 10.0, (name, seconds)
        rms = float(np.sqrt(np.mean(samples.astype(np.float64) ** 2)))
        assert rms > 300, (name, rms)  # full scale is 32767; silence is ~0
        voiced = np.mean(np.abs(samples) > 1000)
        assert voiced > 0.2, (name, voiced)


def test_audio_task_files_match_the_generator(gen, tasks):
    for variant in tasks["transcription"].variants:
        name = Path(variant.audio).stem
        assert variant.expected == gen.SPEECH[name], f"transcript of {name} differs from make_testdata.SPEECH"
    for variant in tasks["audio_qa"].variants:
        assert Path(variant.audio).stem in gen.SPEECH
        text = gen.SPEECH[Path(variant.audio).stem].lower()
        first_terms = [g[0] if isinstance(g, list) else g for g in variant.expected]
        assert any(t.lower() in text for t in first_terms), f"{variant.id}: answer not in the clip"
    for variant in tasks["ambiguous_audio"].variants:
        assert Path(variant.audio).stem == gen.TONE_NAME


# ---------------------------------------------------------------------------------------------------------
# Video
# ---------------------------------------------------------------------------------------------------------
def _check_video(path: Path, gen) -> None:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        times = [frame.time for frame in container.decode(stream)]
        assert (stream.codec_context.width, stream.codec_context.height) == (1280, 720)
        assert times[-1] + 1 / float(stream.average_rate) == pytest.approx(8.0, abs=0.05)
    assert len(times) == 8 * gen.VIDEO_FPS
    with av.open(str(path)) as container:
        assert container.streams.video[0].codec_context.name == "h264"
        frames = {}
        for frame in container.decode(video=0):
            second = int(frame.time)
            if abs(frame.time - (second + 0.5)) < 0.5 / gen.VIDEO_FPS + 1e-6 and second not in frames:
                frames[second] = frame.to_image()
    assert sorted(frames) == list(range(8))
    for second, (digit, _name, rgb) in enumerate(gen.VIDEO_SECONDS):
        corner = frames[second].getpixel((20, 20))
        assert all(abs(a - b) <= 16 for a, b in zip(corner, rgb)), (second, corner, rgb)
        # the digit box (centre of the frame) matches the drawn digit up to codec noise
        box = (500, 120, 780, 600)
        reference = np.asarray(gen.video_frame(second).crop(box), dtype=np.int16)
        decoded = np.asarray(frames[second].crop(box), dtype=np.int16)
        assert np.mean(np.abs(reference - decoded)) < 8, f"second {second} does not show digit {digit}"


def test_committed_video_has_the_expected_frames(gen):
    path = TESTDATA_DIR / "video" / f"{gen.VIDEO_NAME}.mp4"
    assert path.stat().st_size < 200_000
    _check_video(path, gen)


def test_regenerated_video_is_equivalent(gen, tmp_path):
    path = tmp_path / "v.mp4"
    gen.write_video(path)
    _check_video(path, gen)


def test_video_task_file_matches_the_generator(gen, tasks):
    variants = {v.id: v for v in tasks["video_analysis"].variants}
    digits = [g[0] for g in variants["digits_in_order"].expected]
    colors = [g[0] for g in variants["colors_in_order"].expected]
    assert digits == [str(d) for d, _, _ in gen.VIDEO_SECONDS]
    assert colors == [name for _, name, _ in gen.VIDEO_SECONDS]
    green = next(d for d, name, _ in gen.VIDEO_SECONDS if name == "green")
    assert variants["number_on_green"].expected[0][0] == str(green)


def test_digit_frames_differ(gen):
    """Each second's picture is distinct (a broken digit table would make two seconds look the same)."""
    pictures = [gen.video_frame(s).tobytes() for s in range(8)]
    assert len(set(pictures)) == 8
    masks = set()
    for s in range(8):
        arr = np.asarray(gen.video_frame(s))
        masks.add((arr != arr[0, 0]).any(axis=2).tobytes())
    assert len(masks) == 8  # the digit shapes themselves differ


# ---------------------------------------------------------------------------------------------------------
# Task files
# ---------------------------------------------------------------------------------------------------------
SUITES = {
    "quality": {"entity_extraction", "tool_calling", "kannada_entities", "kannada_response",
                # graded sets (testdata/tasks/graded.yaml): reasoning-gym generators and HumanEval
                "arithmetic", "letter_counting", "leg_counting", "word_sorting", "humaneval"},
    # and the generated sets (testdata/tasks/vision_graded.yaml, audio_graded.yaml): their media made on first use
    "vision": {"image_description", "color_identification",
               "count_shapes", "read_number", "read_word", "name_colour", "name_position"},
    "audio": {"transcription", "audio_qa", "ambiguous_audio", "spoken_sentences"},
    "video": {"video_analysis"},
}
REQUIRES = {"quality": "text", "vision": "vision", "audio": "audio", "video": "video"}


def test_every_task_file_loads_with_media_present(tasks):
    for suite, names in SUITES.items():
        assert {t.name for t in tasks.values() if t.suite == suite} == names, suite
    for task in tasks.values():
        assert task.checker in CHECKERS, f"{task.name}: unknown checker '{task.checker}'"
        if task.suite not in SUITES:
            continue
        assert task.requires == REQUIRES[task.suite], task.name
        assert len(task.variants) >= 3, task.name
        for variant in task.variants:
            for kind, path in task.media_paths(variant).items():
                assert path.is_file(), path
                if task.requires != "text":
                    assert kind == {"vision": "image", "audio": "audio", "video": "video"}[task.requires]
            if task.requires != "text":
                assert task.media_paths(variant), f"{task.name}/{variant.id} carries no media"


def test_quality_suite_matches_the_report(tasks):
    tool = tasks["tool_calling"]
    assert len(tool.variants) == 8
    assert len({v.prompt for v in tool.variants}) == 8
    assert {t["function"]["name"] for t in tool.tools} == {"web_search", "search_memory", "get_entity_details"}
    assert {v.expected["function"] for v in tool.variants} == {"web_search", "search_memory", "get_entity_details"}
    for t in tool.tools:
        required = t["function"]["parameters"]["required"]
        assert tool.checker_args["required_args"][t["function"]["name"]] == required
    for v in tasks["entity_extraction"].variants:
        assert len(v.expected["persons"]) == 7 and len(v.expected["places"]) == 3
        for name in v.expected["persons"] + v.expected["places"]:
            assert name.split()[-1] in v.prompt, f"{v.id}: {name} not in the passage"
    key = ["priya", "arun", "mom", "bangalore", "hubli", "diwali"]
    for v in tasks["kannada_entities"].variants:
        assert [g[0] for g in v.expected] == key
        for word in ("Priya", "Arun", "Mom", "Bangalore", "Hubli", "Diwali"):
            assert word in v.prompt
        assert any(0x0C80 <= ord(ch) <= 0x0CFF for ch in v.prompt)
    for v in tasks["kannada_response"].variants:
        assert sum(0x0C80 <= ord(ch) <= 0x0CFF for ch in v.prompt) >= 8


def test_distinct_prompts_per_task(tasks):
    for name in set().union(*SUITES.values()):
        task = tasks[name]
        keys = {(v.prompt, v.image, v.audio, v.video) for v in task.variants}
        assert len(keys) == len(task.variants), f"{name}: two variants send the same request"


def test_media_total_stays_small():
    total = sum(p.stat().st_size for kind in ("image", "audio", "video")
                for p in (TESTDATA_DIR / kind).iterdir() if p.is_file())
    assert total < 2_000_000, total
