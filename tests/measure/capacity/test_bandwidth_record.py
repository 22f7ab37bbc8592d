"""The bandwidth record (benchlib.measure.capacity.bandwidth): every measurement kept with its time and the machine's load,
measured again when the newest is too old or when asked, the roofline's figure chosen by the stated rule, and the
older one-measurement cache file read as a record of one."""

from __future__ import annotations

import json
import math
import time

import pytest

from benchlib.measure.capacity import bandwidth

CPU, CORES = "Test CPU", 4


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """A fake measure_fn whose figures and 'other processes' CPU share come from the queues the test fills."""
    monkeypatch.setattr(bandwidth, "_MEMO", {})
    figures: list[float] = []
    others: list[float] = []
    calls: list[float] = []

    def fake_measure():
        value = figures.pop(0)
        calls.append(value)
        return {"read_gbs": value, "copy_gbs": 2 * value, "method": "fake"}

    monkeypatch.setattr(bandwidth, "load_during",
                        lambda fn: {**fn(), "load": {"other_cpu_percent": others.pop(0), "loadavg_1m_before": 1.0}})
    return {"figures": figures, "others": others, "calls": calls, "measure": fake_measure,
            "cache": tmp_path / "bandwidth.json"}


def _measure(machine, now, fresh=False):
    return bandwidth.machine_measurement(CPU, CORES, machine["cache"], now=now, measure_fn=machine["measure"],
                                        fresh=fresh)


def test_every_measurement_is_kept_with_its_time_and_load(machine):
    machine["figures"] += [20.0, 30.0, 25.0]
    machine["others"] += [2.0, 40.0, 5.0]
    first = _measure(machine, now=1000.0)
    assert machine["calls"] == [20.0] and first["reused"] == "no" and first["n_measurements"] == 1
    _measure(machine, now=1001.0, fresh=True)  # asked: measured again, kept beside the first
    last = _measure(machine, now=1002.0, fresh=True)
    stored = json.loads(machine["cache"].read_text())
    kept = stored["machines"][f"{CPU} × {CORES}"]
    assert stored["format"] == 2 and [m["read_gbs"] for m in kept] == [20.0, 30.0, 25.0]
    assert [m["measured_unix"] for m in kept] == [1000.0, 1001.0, 1002.0]
    assert [m["load"]["other_cpu_percent"] for m in kept] == [2.0, 40.0, 5.0]
    assert [m["copy_gbs"] for m in last["measurements"]] == [40.0, 60.0, 50.0]
    # the rule: the best idle one (25 GB/s), not the higher figure taken while others used 40 % of the CPU
    assert last["read_gbs"] == 25.0 and last["under_load"] is False and last["n_idle"] == 2
    assert "< 10 %" in last["rule"]


def test_measured_again_only_when_the_newest_is_older_than_the_stated_age(machine):
    machine["figures"] += [20.0, 22.0]
    machine["others"] += [1.0, 1.0]
    _measure(machine, now=1000.0)
    reused = _measure(machine, now=1000.0 + bandwidth.CACHE_MAX_AGE_S - 1)
    assert machine["calls"] == [20.0] and reused["reused"].startswith("cache") and reused["n_measurements"] == 1
    renewed = _measure(machine, now=1000.0 + bandwidth.CACHE_MAX_AGE_S + 1)
    assert machine["calls"] == [20.0, 22.0] and renewed["n_measurements"] == 2 and renewed["read_gbs"] == 22.0


def test_with_no_idle_measurement_the_best_one_is_labelled_measured_under_load(machine):
    machine["figures"] += [18.0, 24.0]
    machine["others"] += [35.0, 60.0]
    _measure(machine, now=time.time() - 10)
    _measure(machine, now=time.time() - 5, fresh=True)
    record = bandwidth.record(None, {"available": False}, CPU, CORES, cache=machine["cache"],
                              measure_fn=machine["measure"])
    assert record["ceiling_gbs"] == 24.0 and record["ceiling_source"] == bandwidth.MEASURED_UNDER_LOAD
    assert "measured under load" in record["ceiling_method"] and record["measured"]["under_load"] is True
    assert record["measured"]["n_measurements"] == 2 and record["measured"]["n_idle"] == 0


def test_an_old_single_measurement_file_is_migrated(machine):
    machine["cache"].write_text(json.dumps({"read_gbs": 12.8, "copy_gbs": 27.4, "method": "old", "machine":
                                            f"{CPU} × {CORES}", "measured_unix": 1000.0}))
    old = _measure(machine, now=1000.0 + 60)
    assert machine["calls"] == [] and old["read_gbs"] == 12.8 and old["n_measurements"] == 1
    assert old["under_load"] is True  # its load was never recorded: not known to be idle
    machine["figures"] += [35.0]
    machine["others"] += [3.0]
    both = _measure(machine, now=1000.0 + 120, fresh=True)
    kept = json.loads(machine["cache"].read_text())["machines"][f"{CPU} × {CORES}"]
    assert [m["read_gbs"] for m in kept] == [12.8, 35.0] and kept[0]["load"] is None
    assert both["read_gbs"] == 35.0 and both["under_load"] is False


def test_the_rule_on_its_own():
    assert bandwidth.choose([]) == (None, False)
    loaded = {"read_gbs": 50.0, "load": {"other_cpu_percent": 10.0}}  # 10 % is not below the 10 % line
    idle = {"read_gbs": 30.0, "load": {"other_cpu_percent": 9.9}}
    assert bandwidth.choose([loaded, idle]) == (idle, False)
    assert bandwidth.choose([loaded, {"read_gbs": 20.0, "load": None}]) == (loaded, True)


def test_load_during_records_the_machines_load_around_a_real_call():
    def work():
        time.sleep(0.3)  # long enough for the kernel's CPU counters (10 ms ticks) to move
        return {"read_gbs": 1.0}

    result = bandwidth.load_during(work)
    load = result["load"]
    assert result["read_gbs"] == 1.0
    for key in ("loadavg_1m_before", "loadavg_1m_after", "cpu_percent", "own_cpu_percent", "other_cpu_percent"):
        assert math.isfinite(load[key]) and load[key] >= 0, key
    assert load["other_cpu_percent"] <= load["cpu_percent"] <= 100


def test_with_only_busy_measurements_another_is_made_after_an_hour_not_a_week(machine):
    machine["figures"] += [3.9, 6.1]
    machine["others"] += [85.0, 2.0]  # the first beside other jobs, the second on an idle machine
    _measure(machine, now=1000.0)
    within = _measure(machine, now=1000.0 + bandwidth.UNDER_LOAD_RETRY_S - 1)
    assert machine["calls"] == [3.9] and within["under_load"] is True
    again = _measure(machine, now=1000.0 + bandwidth.UNDER_LOAD_RETRY_S + 1)
    assert machine["calls"] == [3.9, 6.1] and again["read_gbs"] == 6.1 and again["under_load"] is False
    # with an idle one on record, the week's rule again
    kept = _measure(machine, now=1000.0 + 2 * bandwidth.UNDER_LOAD_RETRY_S + 2)
    assert machine["calls"] == [3.9, 6.1] and kept["n_measurements"] == 2
