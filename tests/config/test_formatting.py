"""How a number is written for a person (benchlib.config.formatting): one mark for a missing value whatever its
type, format specs, readable table numbers, verdict-line numbers, intervals and units."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from benchlib.config.formatting import (
    MISSING,
    NO_BOUNDS,
    READABLE,
    bounded_column,
    bracket,
    fmt,
    interval,
    is_missing,
    point_difference,
    points,
    quantity,
    readable,
    short_number,
)


def test_a_missing_value_is_one_mark_whatever_its_type():
    for value in (None, math.nan, np.float32("nan"), np.float64("nan"), pd.NA, "nan", ""):
        assert fmt(value) == MISSING, repr(value)
    assert fmt(math.nan, ".1f", "n/a") == "n/a"
    assert is_missing(pd.NA) and is_missing(np.float32("nan")) and not is_missing("nan") and not is_missing(0.0)


def test_numbers_follow_their_spec_and_text_and_flags_stay_readable():
    assert fmt(0.5923, ".0%") == "59%" and fmt(12.345, ".1f") == "12.3" and fmt(np.int64(7), ".0f") == "7"
    assert fmt(1234.5678) == "1235"  # the default: four significant digits
    assert fmt(True) == "yes" and fmt(np.bool_(False)) == "no"
    assert fmt("Supported") == "Supported"


def test_readable_numbers_in_tables_never_use_e_notation():
    assert [readable(v) for v in (3.0, 1234.56, 45.67, 0.01234, -250.4)] == ["3", "1235", "45.7", "0.0123", "-250"]
    assert readable(math.nan) == readable(None) == readable("text") == readable(True) == MISSING


def test_verdict_lines_carry_three_significant_digits():
    assert short_number(38.94) == "38.9" and short_number(266.4) == "266" and short_number("12.5") == "12.5"
    assert short_number(math.nan) == "n/a" and short_number("PASS") == "PASS"


def test_an_interval_follows_its_value_and_a_negative_range_keeps_its_signs_apart():
    assert interval(60.75, 60.2, 61.25, ".1f", 4) == "60.8 [60.2–61.2] (n=4)"
    assert interval(-0.86, -1.35, -0.38, ".2f", 3) == "-0.86 [-1.35, -0.38] (n=3)"
    assert interval(0.25, math.nan, math.nan, ".0%", 4) == "25% (n=4)"  # no interval: the value and its count
    assert interval(math.nan, 0.1, 0.2, ".1f", 4) == MISSING
    assert bracket(0.21, 0.94, ".0%") == " [21%–94%]" and bracket(0.2, None, ".0%") == ""


def test_a_percentile_column_reads_value_and_bounds_and_says_where_it_has_none():
    assert interval(0.01234, 0.0101, 1234.6, READABLE) == "0.0123 [0.0101–1235]"  # readable, as the table's cells
    assert interval(0.25, math.nan, 0.3, ".2f", unbounded=NO_BOUNDS) == "0.25 [–]"
    frame = pd.DataFrame({"ttft_s_p50": [0.1234, 0.2, math.nan], "ttft_s_p50_lo": [0.11, math.nan, 0.1],
                          "ttft_s_p50_hi": [0.135, math.nan, 0.3]})
    assert bounded_column(frame, "ttft_s_p50") == ["0.123 [0.11–0.135]", "0.2 [–]", MISSING]
    # a file written before the bounds were: no _lo / _hi columns at all
    assert bounded_column(frame[["ttft_s_p50"]], "ttft_s_p50") == ["0.123 [–]", "0.2 [–]", MISSING]


def test_a_quantity_carries_its_unit_only_when_it_has_a_value():
    assert quantity(16.0, "g", "GB") == "16 GB" and quantity(4096, ",.0f", "tokens") == "4,096 tokens"
    assert quantity(math.nan, "g", "GB", missing="") == "" and quantity(None, ".2f", "req/s") == MISSING


def test_an_accuracy_difference_is_in_signed_percentage_points_with_its_interval():
    assert point_difference(-0.5862, -0.7401, -0.3712) == "-59 [-74, -37] pp"
    assert point_difference(0.30, 0.012, 0.53) == "+30 [+1, +53] pp"
    assert point_difference(0.0, -0.004, 0.2) == "0 [0, +20] pp"  # no signed zero
    assert point_difference(0.25, math.nan, 0.5) == "+25 pp" and point_difference(None, 0.1, 0.2) == MISSING
    assert points(np.float64(0.583)) == "+58" and points(math.nan) == MISSING
