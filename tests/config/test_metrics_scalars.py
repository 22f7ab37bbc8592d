"""metrics._ratio's two paths, plain numbers and Series, follow one rule."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from benchlib.config import metrics

VALUES = [0, 1, 3, -2, 0.5, -0.25, 7.0, float("nan"), float("inf"), -float("inf"), True, False,
          np.int64(4), np.float32(2.5), np.float64(-1.0), 2 ** 60]


@pytest.mark.parametrize("num_positive", [False, True])
def test_plain_numbers_give_what_a_series_gives(num_positive: bool) -> None:
    """Each pair of plain numbers (the per-request path on the sending loop) gives the same float, or NaN, as the
    same pair through the Series path (the summaries' path)."""
    for num in VALUES:
        for den in VALUES:
            scalar = metrics._ratio(num, den, num_positive=num_positive)
            series = metrics._ratio(pd.Series([num], dtype=object), pd.Series([den], dtype=object),
                                    num_positive=num_positive).iloc[0]
            assert type(scalar) is float, (num, den)
            assert (math.isnan(scalar) and math.isnan(series)) or scalar == series, (num, den, scalar, series)


def test_per_request_rates_from_plain_numbers() -> None:
    assert metrics.decode_tps(11, 0.5) == pytest.approx(20.0)
    assert metrics.tpot_s(11, 0.5) == pytest.approx(0.05)
    assert math.isnan(metrics.decode_tps(1, 0.5))  # one token: no decode interval
    assert math.isnan(metrics.prefill_tps(100, 0.0))  # no time: no rate, never inf
    assert math.isnan(metrics.prefill_tps(0, 0.2))  # nothing computed: no rate
    assert math.isnan(metrics.prefill_tps(None, 0.2))  # a missing count (the general path) stays NaN
    assert metrics.prefill_tps("100", 0.5) == pytest.approx(200.0)  # text that is a number, as pandas coerces it
