"""The settings label (benchlib.config.variant's SETTINGS RULE): short unambiguous keys, lists joined, odd or long
values hashed, a long label capped — and every label a valid server.variant."""

from __future__ import annotations

import re

from benchlib.config.params import ServerParams, validate
from benchlib.config.variant import LABEL_MAX, changed_settings, leaves, settings_label

BASE = {"host": {"name": "h"}, "server": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}}
VARIANT = re.compile(ServerParams.model_fields["variant"].metadata[-1].pattern)


def label(**sections) -> str:
    base = validate(BASE).shaping_params()
    data = validate({**BASE, **sections}).shaping_params()
    return settings_label(changed_settings(base, data), list(leaves(data)))


def test_only_what_differs_is_named_and_what_does_not_shape_results_is_left_out():
    assert label(run={"repeats": 3}) == ""  # the default
    assert label(run={"repeats": 5, "store": "file:///tmp/x"}) == "repeats=5"


def test_a_key_shared_by_two_settings_is_named_with_its_section():
    assert label(run={"max_tokens": 16}) == "run.max_tokens=16"
    assert label(sweep={"max_tokens": 8}) == "sweep.max_tokens=8"


def test_values_lists_booleans_whole_floats_and_odd_or_long_values():
    assert label(sweep={"context_lengths": [128, 512]}) == "context_lengths=128+512"
    assert label(run={"thinking": True, "timeout_s": 30.0, "temperature": 0.7}) == \
        "temperature=0.7,timeout_s=30,thinking=true"
    odd = label(server={**BASE["server"], "extra_body": {"stop": ["\n\n", "a,b"]}})
    assert re.fullmatch(r"stop=[0-9a-f]{6}", odd), odd
    long = label(tasks=["arithmetic", "letter_counting", "leg_counting", "word_sorting"])
    assert re.fullmatch(r"tasks=[0-9a-f]{6}", long), long
    other = label(tasks=["arithmetic", "letter_counting", "leg_counting", "humaneval"])
    assert other != long, "another value, another hash"


def test_a_long_label_is_capped_and_still_unique_and_valid():
    many = {"repeats": 5, "warmups": 2, "graded_items": 9, "max_tokens": 99, "timeout_s": 61, "deadline_s": 601,
            "connect_timeout_s": 11, "retries_429": 4, "max_error_rate": 0.3}
    one = label(run=many)
    other = label(run={**many, "max_error_rate": 0.4})
    assert len(one) <= LABEL_MAX and one.startswith("graded_items=9,warmups=2,repeats=5,") and re.search(r",\dmore\.[0-9a-f]{8}$", one)
    assert one != other
    for text in (one, other, label(sweep={"context_lengths": [128, 512]})):
        assert VARIANT.fullmatch(text), text
