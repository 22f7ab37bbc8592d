"""Every transcribed reference cell is checked against the seed's own printed table, keyed by the cell.

Needs the seed documents (../shared/seeds beside the repository, as in CI): without them these tests fail and
say where the seeds belong, rather than pass.
"""

import math
import re

import pandas as pd
import pytest

from benchlib.config.paths import REFERENCE_DIR
from benchlib.paper import TABLES
from benchlib.published import arithmetic, reference, transcription


@pytest.fixture(scope="module")
def ref():
    return reference.load_reference()


@pytest.fixture(scope="module")
def seeds(ref):
    specs = transcription.load_specs()
    texts = transcription.seed_texts(ref["source"].unique())
    return texts, transcription.read_tables(specs, texts)


def _group(frame, row):
    return frame[(frame["source"] == row["source"]) & (frame["seed_table"] == row["seed_table"])
                 & (frame["seed_row"] == row["seed_row"])]


def _problems(frame, index, seeds):
    texts, tables = seeds
    return transcription.check_cells(_group(frame, frame.loc[index]), tables, texts) + \
        transcription.check_values(frame.loc[[index]])


def _numeric(ref):
    """Rows whose cell prints a number (coded text cells excluded: they are flipped separately)."""
    has = ref["value"].notna() | ref["value_low"].notna()
    coded = [(m, t) in transcription.CODES or u == "flag" for m, t, u in zip(ref["metric"], ref["value_text"],
                                                                             ref["unit"])]
    return ref[has & ~pd.Series(coded, index=ref.index) & ref["value_text"].str.contains(r"\d")]


def _mutated(ref, index, new_number=None):
    """A copy with the row's first printed number changed (by 7 units of its last decimal, or to new_number)."""
    frame = ref.copy()
    text = frame.loc[index, "value_text"]
    match = re.search(r"\d+(?:\.\d+)?", text)
    number = match.group(0)
    decimals = len(number.split(".")[1]) if "." in number else 0
    new = new_number or f"{float(number) + 7 * 10 ** -decimals:.{decimals}f}"
    frame.loc[index, "value_text"] = text[:match.start()] + new + text[match.end():]
    column = "value" if not math.isnan(frame.loc[index, "value"]) else "value_low"
    frame.loc[index, column] = float(new)
    return frame


def test_every_row_names_its_cell(ref):
    specs = transcription.load_specs()
    assert (ref["seed_table"] != "").all() and (ref["seed_row"] != "").all()
    tabled = ref[ref["seed_table"] != transcription.TEXT]
    assert (tabled["seed_col"] != "").all()
    assert set(tabled["seed_table"]) <= set(specs["table"])
    assert (ref.loc[ref["seed_table"] == transcription.TEXT, "seed_col"] == "").all()
    # the table a row cites belongs to the section the row cites
    sections = specs.set_index("table")["section"]
    assert (tabled["section"] == tabled["seed_table"].map(sections)).all()


def test_every_cell_is_where_its_seed_prints_it(ref):
    assert transcription.check(ref) == []


def test_every_single_number_change_fails(ref, seeds):
    numeric = _numeric(ref)
    assert len(numeric) >= 380
    survivors = [(r.source[:3], r.seed_table, r.seed_row, r.seed_col, r.value_text) for index, r in numeric.iterrows()
                 if not _problems(_mutated(ref, index), index, seeds)]
    assert survivors == []


def test_the_mutation_the_issue_names_fails(ref):
    changes = [("§4", {"model": "Qwen3.5-4B", "task": "Multilingual"}, "17.2"),
               ("§5 Latency and Accuracy (table)", {"model": "Gemma 4 E2B", "task": "Transcription (ASR)",
                                                    "metric": "e2e_latency"}, "4.22"),
               ("§9 Phase 2 Super Baseline: Performance", {"metric": "ttft", "host": "Beast"}, "390.4"),
               ("Full Breakdown: openclaw", {"model": "Gemma 4 E2B", "metric": "prefill_tps",
                                            "seed_row": "Prefill (long)"}, "608")]
    frame = ref
    for section, filters, new in changes:
        rows = reference.select(frame, section, **filters)
        assert len(rows) == 1, (section, filters)
        frame = _mutated(frame, rows.index[0], new)
    problems = transcription.check(frame)
    assert len(problems) >= len(changes)
    for text in ("17.2", "4.22s", "390.4", "608 tok/s"):
        assert any(text in line for line in problems), text


def test_a_value_that_disagrees_with_its_text_fails(ref, seeds):
    for index in _numeric(ref).index[::25]:
        frame = ref.copy()
        column = "value" if not math.isnan(frame.loc[index, "value"]) else "value_high"
        frame.loc[index, column] += 1
        assert transcription.check_values(frame.loc[[index]]), frame.loc[index, "value_text"]


def test_a_flipped_code_fails(ref):
    coded = ref[[(m, t) in transcription.CODES for m, t in zip(ref["metric"], ref["value_text"])]]
    assert len(coded) >= 40
    for index in coded.index:
        frame = ref.loc[[index]].copy()
        frame["value"] = 1 - frame["value"]
        assert transcription.check_values(frame), ref.loc[index, "value_text"]


def test_values_swapped_between_columns_fail(ref):
    frame = ref.copy()
    phi = reference.select(frame, "§4", model="Phi-4 Multimodal", task="Basic Q&A").index[0]
    gemma = reference.select(frame, "§4", model="Gemma 4 E2B", task="Basic Q&A").index[0]
    for column in ("value", "value_text"):
        frame.loc[[phi, gemma], column] = frame.loc[[gemma, phi], column].to_numpy()
    assert transcription.check(frame)


def test_a_text_phrase_must_be_unique_and_hold_its_number(ref, seeds):
    texts, tables = seeds
    row = reference.select(ref, "§5 Latency and Accuracy (text)", model="Gemma 4 E2B").copy()
    assert transcription.check_cells(row, tables, texts) == []
    row["seed_row"] = "s"
    assert any("occurs" in p for p in transcription.check_cells(row, tables, texts))


def test_a_table_not_where_the_spec_says_is_a_clear_error(seeds):
    texts, _ = seeds
    spec = transcription.load_specs().set_index("table").loc["004-full-picture"].copy()
    spec["table"] = "004-full-picture"
    spec["columns"] = "Format | GPU Memory | tok/s | Speedup"
    with pytest.raises(ValueError, match="header .* not found"):
        transcription.read_table(spec, texts[spec["source"]])


def test_missing_seeds_are_named():
    with pytest.raises(FileNotFoundError, match="999_missing.txt not found"):
        transcription.seed_texts(["999_missing.txt"])


def test_printed_arithmetic_is_recomputed(ref):
    table = arithmetic.derivations(ref)
    assert len(table) >= 40
    assert list(table.columns) == arithmetic.COLUMNS
    # the two figures the seeds print that their own cells do not give (documented in paper/reference/README.md)
    assert set(table.loc[~table["agrees"], "figure"]) == {"Generation Speed · openclaw · E2B vs E4B",
                                                          "The Full Picture · fp8 (online) tok/s"}
    averages = table[table["figure"].str.startswith("§6 average throughput")].set_index("figure")
    assert averages["recomputed"].round(1).tolist() == [41.1, 33.9, 15.2]


def test_every_seed_table_is_listed_with_where_it_lives():
    readme = (REFERENCE_DIR / "README.md").read_text(encoding="utf-8")
    listing = readme[readme.index("## Every seed table, and where it lives"):]
    rows = [line for line in listing.splitlines() if line.startswith("| `")]
    cells = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in rows]
    listed = {t for seed, _, _ in cells for t in re.findall(r"`(\d{3}-[\w-]+)`", seed)}
    assert listed == set(transcription.load_specs()["table"])
    for line, (_, rebuilt, why) in zip(rows, cells):
        assert rebuilt or why, line  # a paper table, or the reason there is none
        assert set(re.findall(r"`(\w+)`", rebuilt)) <= set(TABLES), line
