"""Generated graded sets (benchlib.config.image_set, speech_set, graded): seeded items with known content, the same
for a seed and size everywhere, drawn or spoken on first use into the cache folder, and what the pictures hold is
what the answers say."""

from __future__ import annotations

import hashlib
import io
import json
import re
import wave

import pytest
from PIL import Image, ImageDraw, ImageFont

from benchlib.config import graded, image_set, speech_set
from benchlib.config.graded import GradedSource, graded_variants, media_folder, render_media
from benchlib.config.tasks import TaskError, _load_file, load_tasks

VISION_SETS = {"count_shapes", "read_number", "read_word", "name_colour", "name_position"}


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FRONTIER_BENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_declared_sets_have_their_sizes_and_unique_items():
    tasks = load_tasks()
    assert {n for n, t in tasks.items() if t.graded and t.graded.source == "generated_image"} == VISION_SETS
    speech = tasks["spoken_sentences"]
    assert speech.suite == "audio" and speech.transcribes and speech.checker == "exact_words"
    for name in [*VISION_SETS, "spoken_sentences"]:
        task = tasks[name]
        assert len(task.variants) == 200 and len({v.id for v in task.variants}) == 200, name
        assert task.suite in ("vision", "audio") and task.requires == task.suite, name
    assert len({v.expected for v in speech.variants}) == 200


def test_items_are_fixed_by_seed_and_the_first_n_do_not_depend_on_the_size():
    for dataset in image_set.DATASETS:
        made = image_set.items(dataset, 7, 50, {})
        assert made == image_set.items(dataset, 7, 50, {}) and made[:5] == image_set.items(dataset, 7, 5, {})
        assert made != image_set.items(dataset, 8, 50, {})
    assert speech_set.items(7, 30)[:4] == speech_set.items(7, 4) and speech_set.items(7, 4) != speech_set.items(8, 4)
    # pure-Python draws: these digests hold on every machine (a changed generator must change them on purpose)
    assert digest(image_set.items("count_shapes", 2024, 200, {})) == "fcc613d117657f30"
    assert digest(speech_set.items(2024, 200)) == "481c8262be87d48b"


def test_every_answer_of_the_pools_occurs_and_is_what_the_scene_holds():
    tasks = load_tasks()
    answers = {name: {v.expected["answer"] for v in tasks[name].variants} for name in VISION_SETS}
    assert answers["name_colour"] == set(image_set.COLOURS) and answers["name_position"] == set(image_set.POSITIONS)
    assert answers["count_shapes"] == {str(n) for n in range(1, 8)} and len(answers["read_number"]) > 190
    for variant in tasks["count_shapes"].variants:
        shape = re.search(r"How many (\w+)s", variant.prompt).group(1)
        boxes = variant.expected["shapes"]
        assert sum(s["shape"] == shape for s in boxes) == int(variant.expected["answer"])
        cells = {(b["box"][0] // 96, b["box"][1] // 96) for b in boxes}
        assert len(cells) == len(boxes) and all(0 <= c <= image_set.CANVAS for b in boxes for c in b["box"])
    draw = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    for name in ("read_number", "read_word"):
        for variant in tasks[name].variants:
            scene = variant.expected
            left, top, right, bottom = draw.textbbox(
                (image_set.CANVAS // 2 + scene["offset"][0], image_set.CANVAS // 2 + scene["offset"][1]),
                scene["text"], font=ImageFont.load_default(size=scene["size"]), anchor="mm")
            assert left > 0 and top > 0 and right < image_set.CANVAS and bottom < image_set.CANVAS, variant.id


def test_the_pictures_show_the_answer():
    for variant in image_set.items("name_colour", 3, 10, {}) + image_set.items("name_position", 3, 10, {}):
        scene = variant["expected"]
        picture = Image.open(io.BytesIO(image_set.render(scene))).convert("RGB")
        x0, y0, x1, y1 = scene["shapes"][0]["box"]
        centre = ((x0 + x1) // 2, (y0 + 3 * y1) // 4)  # inside a circle, a square and an upward triangle alike
        assert picture.getpixel(centre) == image_set.COLOURS[scene["shapes"][0]["colour"]][0]
        if scene["dataset"] == "name_position":
            side = {"left": centre[0] < 128, "right": centre[0] > 256, "top": centre[1] < 128,
                    "bottom": centre[1] > 256, "centre": 128 < centre[0] < 256 and 128 < centre[1] < 256}
            assert side[scene["answer"]] and sum(side.values()) == 1, scene
    word = image_set.items("read_word", 3, 1, {})[0]["expected"]
    picture = Image.open(io.BytesIO(image_set.render(word))).convert("L")
    assert picture.getextrema()[0] < 128  # dark ink on the white canvas


def test_a_set_is_drawn_on_first_use_once_and_the_same_bytes_every_time(cache):
    spec = GradedSource(source="generated_image", dataset="count_shapes", seed=5, size=4)
    variants = graded_variants(spec)
    assert not media_folder(spec).exists()  # loading the items draws nothing
    folder = render_media(spec)
    files = sorted(folder.glob("*.png"))
    assert [p.name for p in files] == [f"{v['id']}.png" for v in variants] and (folder / graded.DONE).is_file()
    first = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in files}
    assert render_media(spec) == folder and {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in files} == first
    assert all(image_set.render(v["expected"]) == first[f"{v['id']}.png"][0] for v in variants)
    (folder / graded.DONE).unlink()
    render_media(spec)  # an incomplete folder is made again, to the same bytes
    assert all(p.read_bytes() == first[p.name][0] for p in files)
    assert graded_variants(spec)[0]["image"] == str(folder / files[0].name)


def test_speech_is_spoken_the_same_every_time_as_16_khz_mono_clips(cache):
    spec = GradedSource(source="generated_speech", seed=11, size=3)
    folder = render_media(spec)
    clips = {p.name: p.read_bytes() for p in sorted(folder.glob("*.wav"))}
    assert len(clips) == 3
    for data in clips.values():
        with wave.open(io.BytesIO(data)) as clip:
            assert (clip.getframerate(), clip.getnchannels(), clip.getsampwidth()) == (16_000, 1, 2)
            assert 1.5 < clip.getnframes() / 16_000 < 6
    again = cache / "again"
    again.mkdir()
    speech_set.synthesise([(v["expected"], again / f"{v['id']}.wav") for v in speech_set.items(11, 3)])
    assert {p.name: p.read_bytes() for p in sorted(again.glob("*.wav"))} == clips


def test_a_bad_generated_block_is_one_line_naming_the_task(tmp_path):
    cases = [({"dataset": "count_dots"}, "generated_image has no dataset 'count_dots'"),
             ({"dataset": "count_shapes", "config": {"max_dots": 3}}, "unknown config ['max_dots']"),
             ({"dataset": "read_number", "config": {"min_value": 9, "max_value": 2}}, "min_value <= max_value"),
             ({"dataset": "count_shapes", "config": {"max_count": 15}}, "must fit 16 cells")]
    for block, message in cases:
        path = tmp_path / "bad.yaml"
        path.write_text(json.dumps([{"name": "bad", "suite": "vision", "requires": "vision",
                                     "checker": "exact_answer", "graded": {"source": "generated_image", "seed": 1,
                                                                           "size": 3, **block}}]))
        with pytest.raises(TaskError, match=re.escape(message)) as caught:
            _load_file(path)
        assert "task 'bad'" in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="generated_speech takes no dataset or config"):
        GradedSource(source="generated_speech", seed=1, size=2, dataset="x")
