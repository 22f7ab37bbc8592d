"""The one plausibility rule (benchlib.records.plausible) that compare, import-results and export hold rows to."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from benchlib.records import plausible


def rows(**columns) -> pd.DataFrame:
    base = {"request_key": ["a", "b"], "ttft_s": [0.05, 0.06], "itl_s": [[0.01, 0.01], [0.01]],
            "started_at_unix": [1.8e9, 0.0]}
    return pd.DataFrame({**base, **columns})


def test_ordinary_rows_and_empty_cells_pass():
    plausible.check_rows(rows(), "x")
    plausible.check_rows(rows(ttft_s=[None, math.nan], itl_s=[[], []]), "x")  # a failed request has no TTFT


def test_a_gap_swapped_by_the_kernel_stamps_conversion_passes_and_a_real_negative_gap_does_not():
    plausible.check_rows(rows(itl_s=[[0.01, -2e-6], [0.01]]), "x")  # two reads microseconds apart, swapped
    with pytest.raises(plausible.Implausible, match=r"^x: itl_s -0.01 \(request b\) is no request's: a measured "
                                                    r"gap is finite, at least -0.001 and at most 1e\+06$"):
        plausible.check_rows(rows(itl_s=[[0.01], [0.01, -0.01]]), "x")


@pytest.mark.parametrize("column,value,shown", [
    ("ttft_s", -5.0, "-5"), ("ttft_s", math.inf, "inf"), ("ttft_s", "soon", "'soon'"),
    ("started_at_unix", 1e300, "1e+300"), ("started_at_unix", -1.0, "-1"),
])
def test_a_value_no_request_can_have_is_one_line_naming_the_column_value_and_request(column, value, shown):
    frame = rows()
    frame[column] = frame[column].astype(object)
    frame.at[1, column] = value
    with pytest.raises(ValueError) as caught:
        plausible.check_rows(frame, "f.csv", ValueError)
    assert str(caught.value).startswith(f"f.csv: {column} {shown} (request b) is no request's")
