"""Generated images with known content: the items of a `source: generated_image` graded set (benchlib.config.graded).

Each item is a scene drawn from a seeded random generator — shapes with their kind, colour and box, or a rendered
text — and its known answer; the scene is kept in the item's `expected`, so its picture can be drawn again from it
(`render`), identical byte for byte on every machine with the same Pillow: plain Pillow primitives, and for text
Pillow's own embedded font (ImageFont.load_default, no system font), on a white canvas of CANVAS pixels, as PNG.

    count_shapes   n shapes of one kind (circle, square or triangle; n from config min_count..max_count) among up
                   to max_distractors of the other kinds, in distinct cells of a 4 × 4 grid: "How many circles …?";
                   answer the count, read as the last number (checker_args read: last_number)
    read_number    an integer from config min_value..max_value in large dark digits: "What number …?"; answer the
                   integer, read as the last number
    read_word      one word of WORDS (common nouns, none a word an answer says about the picture): "What word …?";
                   answer the word, read as the one choice named (read: one_choice, the choices being WORDS)
    name_colour    one shape filled with a COLOURS colour (never white, the background): "What colour …?"; answer
                   the colour's name, read as the one colour named ("grey" counts as gray, "violet" as purple)
    name_position  one shape at the middle of the left, right, top or bottom edge, or at the centre: "Where …?";
                   answer the position, read as the one position named ("center", "middle" count as centre)

Every item's `expected` holds `answer` and, for the one_choice rule, `choices` (each a list of the names that count
as it, the first its own); the scorer is benchlib.scoring.graded.exact_answer.
"""

from __future__ import annotations

import io
import random
from typing import Any

from PIL import Image, ImageDraw, ImageFont

CANVAS = 384  # pixels a side
GRID = 4  # count_shapes places shapes in distinct cells of a GRID × GRID grid
SHAPES = ("circle", "square", "triangle")
COLOURS: dict[str, tuple[tuple[int, int, int], list[str]]] = {  # name -> (RGB, the names that count as it)
    "red": ((220, 20, 20), ["red"]),
    "green": ((20, 160, 40), ["green"]),
    "blue": ((20, 60, 220), ["blue"]),
    "yellow": ((250, 210, 0), ["yellow"]),
    "orange": ((250, 130, 0), ["orange"]),
    "purple": ((130, 40, 170), ["purple", "violet"]),
    "pink": ((245, 120, 190), ["pink"]),
    "brown": ((130, 80, 30), ["brown"]),
    "black": ((0, 0, 0), ["black"]),
    "gray": ((128, 128, 128), ["gray", "grey"]),
}
POSITIONS = {"left": ["left"], "right": ["right"], "top": ["top"], "bottom": ["bottom"],
             "centre": ["centre", "center", "middle"]}
WORDS = ("apple bread chair cloud dragon engine forest garden guitar hammer island jacket kettle ladder lemon "
         "magnet mirror monkey needle orange pencil pillow planet rabbit river rocket saddle silver spoon "
         "station tiger tomato tunnel violin wallet window winter yellow zebra anchor basket bottle bridge "
         "butter camera candle carpet castle cotton desert doctor donkey feather finger flower glass honey "
         "kitten lizard market melon motor number ocean paper parrot pepper pirate puzzle queen salad "
         "shadow summer sugar table teacher ticket turtle valley wagon water whale").split()
DATASETS = ("count_shapes", "read_number", "read_word", "name_colour", "name_position")
DEFAULTS: dict[str, dict[str, int]] = {
    "count_shapes": {"min_count": 1, "max_count": 7, "max_distractors": 3},
    "read_number": {"min_value": 0, "max_value": 9999},
}
PROMPTS = {
    "count_shapes": "How many {shape}s are in this image? Reply with the number only.",
    "read_number": "What number is written in this image? Reply with the number only.",
    "read_word": "What word is written in this image? Reply with the word only.",
    "name_colour": "What colour is the shape in this image? Reply with the colour name only.",
    "name_position": "Where is the shape in this image: left, right, top, bottom or centre? Reply with one word.",
}


def settings(dataset: str, config: dict[str, Any]) -> dict[str, int]:
    """The dataset's settings: its DEFAULTS with `config` over them; a key it does not know, or a range that is
    empty, is a one-line error."""
    if dataset not in DATASETS:
        raise ValueError(f"generated_image has no dataset {dataset!r} (known: {', '.join(DATASETS)})")
    known = DEFAULTS.get(dataset, {})
    unknown = sorted(set(config) - set(known))
    if unknown:
        raise ValueError(f"generated_image {dataset}: unknown config {unknown} (known: {sorted(known) or 'none'})")
    out = {**known, **{k: int(v) for k, v in config.items()}}
    low, high = ("min_count", "max_count") if dataset == "count_shapes" else ("min_value", "max_value")
    if known and not 0 <= out[low] <= out[high]:
        raise ValueError(f"generated_image {dataset}: need 0 <= {low} <= {high}, got {out[low]}..{out[high]}")
    if dataset == "count_shapes" and out["max_count"] + out["max_distractors"] > GRID * GRID:
        raise ValueError(f"generated_image count_shapes: max_count + max_distractors must fit {GRID * GRID} cells")
    return out


def _box(rng: random.Random, x0: int, y0: int, cell: int) -> list[int]:
    """A square box of 55–85 % of a cell, at a random place inside it."""
    side = rng.randint(cell * 55 // 100, cell * 85 // 100)
    x, y = x0 + rng.randint(0, cell - side), y0 + rng.randint(0, cell - side)
    return [x, y, x + side, y + side]


def _count_shapes(rng: random.Random, cfg: dict[str, int]) -> tuple[str, str, dict[str, Any]]:
    kind = rng.choice(SHAPES)
    count = rng.randint(cfg["min_count"], cfg["max_count"])
    others = [rng.choice([s for s in SHAPES if s != kind]) for _ in range(rng.randint(0, cfg["max_distractors"]))]
    cell = CANVAS // GRID
    cells = rng.sample(range(GRID * GRID), count + len(others))
    shapes = [{"shape": shape, "colour": rng.choice(list(COLOURS)),
               "box": _box(rng, (index % GRID) * cell, (index // GRID) * cell, cell)}
              for shape, index in zip([kind] * count + others, cells)]
    return PROMPTS["count_shapes"].format(shape=kind), str(count), {"shapes": shapes}


def _one_shape(rng: random.Random, colour: str, centre: tuple[int, int]) -> dict[str, Any]:
    side = rng.randint(CANVAS // 6, CANVAS // 4)
    x, y = centre[0] - side // 2, centre[1] - side // 2
    return {"shape": rng.choice(SHAPES), "colour": colour, "box": [x, y, x + side, y + side]}


def _scene(dataset: str, rng: random.Random, cfg: dict[str, int]) -> tuple[str, str, dict[str, Any]]:
    """(prompt, answer, scene) of one item; the scene holds what `render` draws and, for one_choice, the choices."""
    if dataset == "count_shapes":
        return _count_shapes(rng, cfg)
    if dataset in ("read_number", "read_word"):
        text = str(rng.randint(cfg["min_value"], cfg["max_value"])) if dataset == "read_number" else rng.choice(WORDS)
        ink = rng.choice(["black", "blue", "brown", "purple"])
        size = rng.randint(64, 96) if dataset == "read_number" else rng.randint(44, 60)  # 4 digits, 7 letters fit
        scene: dict[str, Any] = {"text": text, "colour": ink, "size": size,
                                 "offset": [rng.randint(-30, 30), rng.randint(-80, 80)]}
        if dataset == "read_word":
            scene["choices"] = [[word] for word in WORDS]
        return PROMPTS[dataset], text, scene
    if dataset == "name_colour":
        colour = rng.choice(list(COLOURS))
        margin = CANVAS // 4
        centre = (rng.randint(margin, CANVAS - margin), rng.randint(margin, CANVAS - margin))
        return PROMPTS[dataset], colour, {"shapes": [_one_shape(rng, colour, centre)],
                                          "choices": [names for _, names in COLOURS.values()]}
    position = rng.choice(list(POSITIONS))
    near, far, mid = CANVAS // 8, CANVAS - CANVAS // 8, CANVAS // 2
    centre = {"left": (near, mid), "right": (far, mid), "top": (mid, near), "bottom": (mid, far),
              "centre": (mid, mid)}[position]
    return PROMPTS[dataset], position, {"shapes": [_one_shape(rng, rng.choice(list(COLOURS)), centre)],
                                        "choices": list(POSITIONS.values())}


def items(dataset: str, seed: int, size: int, config: dict[str, Any]) -> list[dict[str, Any]]:
    """`size` items in a fixed order: item i is drawn with its own generator seeded by (dataset, seed, i), so the
    first n are the same whatever the size. Each: id "s<seed>-<i>", prompt, expected (dataset, answer, scene)."""
    cfg = settings(dataset, config)
    out = []
    for index in range(size):
        rng = random.Random(f"{dataset}/{seed}/{index}")
        prompt, answer, scene = _scene(dataset, rng, cfg)
        out.append({"id": f"s{seed}-{index:04d}", "prompt": prompt,
                    "expected": {"dataset": dataset, "answer": answer, **scene}})
    return out


def _draw_shape(draw: ImageDraw.ImageDraw, shape: dict[str, Any]) -> None:
    x0, y0, x1, y1 = shape["box"]
    fill = COLOURS[shape["colour"]][0]
    if shape["shape"] == "circle":
        draw.ellipse((x0, y0, x1, y1), fill=fill)
    elif shape["shape"] == "square":
        draw.rectangle((x0, y0, x1, y1), fill=fill)
    else:
        draw.polygon([((x0 + x1) // 2, y0), (x1, y1), (x0, y1)], fill=fill)


def render(expected: dict[str, Any]) -> bytes:
    """The item's picture, as PNG bytes, drawn from its scene."""
    image = Image.new("RGB", (CANVAS, CANVAS), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    for shape in expected.get("shapes", []):
        _draw_shape(draw, shape)
    if "text" in expected:
        font = ImageFont.load_default(size=expected["size"])
        centre = (CANVAS // 2 + expected["offset"][0], CANVAS // 2 + expected["offset"][1])
        draw.text(centre, expected["text"], fill=COLOURS[expected["colour"]][0], font=font, anchor="mm")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()
