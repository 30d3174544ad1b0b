"""The timeline index: built in one pass from real and generated traces, a window answered
exactly, bounded by its resolution, searched by name."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest

from harness.timelines import CPU_PID, DEVICE_PID, MAIN_TID
from npulab.profiles import timeline
from npulab.profiles.timeline import build_index
from npulab.profiles.timeline.query import level_for


def brute_force(events: list[dict], start: float, end: float, threshold: float) -> set[int]:
    """The ids of the events a window must send one by one."""
    return {
        e["id"]
        for e in events
        if e["ts"] <= end and e["ts"] + e["dur"] >= start and e["dur"] >= threshold
    }


def test_a_real_torch_trace_has_its_thread_lane_named_and_every_event(
    torch_trace, torch_index
) -> None:
    raw = json.loads(torch_trace.read_text())["traceEvents"]
    drawable = [e for e in raw if e["ph"] in ("X", "i")]
    assert torch_index["events"] == len(drawable)
    assert torch_index["skipped"] == 0
    lanes = timeline.lanes(torch_index["path"])
    main = next(lane for lane in lanes if lane["name"].endswith("(python)"))
    assert main["kind"] == "thread"
    assert main["process"] == "python"
    meta = timeline.meta(torch_index["path"])
    window = timeline.query(torch_index["path"], meta["t_min"], meta["t_max"], 4000)
    names = {window["names"][row[4]] for row in window["events"]}
    assert {"ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"} <= names
    steps = [row for row in window["events"] if window["names"][row[4]].startswith("ProfilerStep")]
    # An op inside a step sits deeper than the step in the same lane.
    addmm = next(row for row in window["events"] if window["names"][row[4]] == "aten::addmm")
    step = next(s for s in steps if s[2] <= addmm[2] <= s[2] + s[3] and s[1] == addmm[1])
    assert addmm[5] > step[5]


@pytest.mark.parametrize("fraction", [(0.0, 1.0), (0.3, 0.35), (0.5, 0.5001), (0.9, 1.2)])
def test_a_window_sends_exactly_the_long_enough_events_that_overlap_it(generated, fraction) -> None:
    meta = timeline.meta(generated["path"])
    span = meta["t_max"] - meta["t_min"]
    start, end = meta["t_min"] + fraction[0] * span, meta["t_min"] + fraction[1] * span
    window = timeline.query(generated["path"], start, end, 1200)
    got = {row[0] for row in window["events"]}
    assert got == brute_force(generated["events"], start, end, window["threshold_us"])
    assert not window["truncated"]


def test_an_event_longer_than_the_window_is_found_from_inside_it(generated) -> None:
    step = next(e for e in generated["events"] if e["name"] == "ProfilerStep#5")
    middle = step["ts"] + step["dur"] / 2
    window = timeline.query(generated["path"], middle - 1, middle + 1, 800)
    assert step["id"] in {row[0] for row in window["events"]}
    # Two µs over 800 pixels: every event is sent, none folded into buckets.
    assert window["level"] == 0
    assert window["buckets"] == []


def test_the_resolution_bounds_what_a_zoomed_out_window_sends(generated) -> None:
    meta = timeline.meta(generated["path"])
    total = generated["index"]["events"]
    for width in (100, 400, 1600):
        window = timeline.query(generated["path"], meta["t_min"], meta["t_max"], width)
        lanes = len(window["lanes"])
        # Buckets are summed into pixels: at most one per pixel (and the edge) and lane.
        assert len(window["buckets"]) <= lanes * (width + 1)
        # Events at least a slot long (over a quarter pixel) nest a few deep at most.
        assert len(window["events"]) <= lanes * width * 4 * 4
        assert len(window["events"]) + len(window["buckets"]) < total
        # What is not sent one by one is counted in the buckets: nothing is lost.
        short = sum(1 for e in generated["events"] if e["dur"] < window["threshold_us"])
        assert sum(bucket[2] for bucket in window["buckets"]) == short
        busy = sum(e["dur"] for e in generated["events"] if e["dur"] < window["threshold_us"])
        assert sum(bucket[3] for bucket in window["buckets"]) == pytest.approx(busy)


def test_the_level_is_the_coarsest_slot_not_wider_than_a_pixel() -> None:
    assert [level_for(r) for r in (0.5, 3.9, 4, 15.9, 16, 1000)] == [0, 0, 1, 1, 2, 4]


def test_a_window_of_some_lanes_sends_only_theirs(generated) -> None:
    lanes = timeline.lanes(generated["path"])
    device = [lane["id"] for lane in lanes if lane["pid"] == str(DEVICE_PID)]
    assert len(device) == 2
    assert all(lane["kind"] == "stream" for lane in lanes if lane["id"] in device)
    meta = timeline.meta(generated["path"])
    window = timeline.query(generated["path"], meta["t_min"], meta["t_max"], 500, device)
    assert {row[1] for row in window["events"]} | {b[0] for b in window["buckets"]} <= set(device)


def test_too_full_a_window_leaves_out_the_shortest_and_says_so(generated) -> None:
    meta = timeline.meta(generated["path"])
    window = timeline.query(generated["path"], meta["t_min"], meta["t_max"], 8000, max_events=50)
    assert window["truncated"]
    assert len(window["events"]) == 50
    kept = min(row[3] for row in window["events"])
    # Everything longer than what was kept made it (classes are sent longest first).
    longer = {e["id"] for e in generated["events"] if e["dur"] >= 2 * kept}
    assert longer <= {row[0] for row in window["events"]}


def test_search_finds_names_with_their_counts_in_time_order(generated) -> None:
    found = timeline.search(generated["path"], "addmmbackward")
    expected = [e for e in generated["events"] if "AddmmBackward0" in e["name"]]
    assert [n["name"] for n in found["names"]] == [
        "autograd::engine::evaluate_function: AddmmBackward0"
    ]
    assert found["names"][0]["count"] == len(expected)
    starts = [m["start"] for m in found["matches"]]
    assert starts == sorted(starts)
    assert len(starts) == min(len(expected), 200)
    assert found["truncated"] == (len(expected) > 200)


def test_search_takes_like_wildcards_literally(generated) -> None:
    assert timeline.search(generated["path"], "%")["names"] == []
    # "_" would match the "#" of ProfilerStep#5 were it LIKE's any-one-character.
    assert timeline.search(generated["path"], "ProfilerStep_5")["names"] == []
    assert timeline.search(generated["path"], "ProfilerStep#5")["names"]
    with pytest.raises(timeline.BadWindow) as bad:
        timeline.search(generated["path"], "  ")
    assert bad.value.field == "q"


def test_an_event_has_its_details_and_args(generated) -> None:
    kernel = next(e for e in generated["events"] if e["cat"] == "kernel")
    found = timeline.event(generated["path"], kernel["id"])
    assert found["name"] == kernel["name"]
    assert found["category"] == "kernel"
    assert found["lane_name"] == "stream 7"
    assert found["process"] == "GPU 0"
    assert (found["start"], found["dur"]) == (kernel["ts"], kernel["dur"])
    assert found["args"] == kernel["args"]
    assert timeline.event(generated["path"], 10**9) is None


def test_begin_end_pairs_instants_and_hostile_events(tmp_path) -> None:
    def at(ph: str, ts: Any, **more: Any) -> dict:
        return {"ph": ph, "ts": ts, "pid": CPU_PID, "tid": MAIN_TID, **more}

    events = [
        at("B", 100.0, name="outer", args={"a": 1}),
        at("B", 110.0, name="inner"),
        at("E", 120.0),
        at("E", 200.0, args={"b": 2}),
        at("i", 150.0, name="mark"),
        at("X", "not a number", name="bad", dur=1),
        at("X", 130.0, name="negative", dur=-5),
        at("X", 140.0, name="x" * 10_000, dur=1, args={"blob": "y" * 100_000}),
        at("B", 300.0, name="never closed"),
        {"ph": "s", "id": 1, "ts": 1.0},  # flows are not drawn
    ]
    facts = build_index("", str(tmp_path), events=events)
    assert (facts["events"], facts["skipped"], facts["unclosed"]) == (4, 2, 1)
    window = timeline.query(facts["path"], 0, 1000, 1000)
    rows = {window["names"][row[4]][:5]: row for row in window["events"]}
    assert rows["outer"][2:4] == [100.0, 100.0]
    assert rows["inner"][2:4] == [110.0, 10.0]
    assert rows["inner"][5] == 1
    assert timeline.event(facts["path"], rows["outer"][0])["args"] == {"a": 1, "b": 2}
    long = timeline.event(facts["path"], rows["xxxxx"][0])
    assert len(long["name"]) == 512
    assert list(long["args"]) == ["truncated"]


def test_an_empty_trace_indexes_to_an_empty_timeline(tmp_path) -> None:
    facts = build_index("", str(tmp_path), events=[])
    assert facts["events"] == 0
    assert timeline.query(facts["path"], 0, 10, 100)["events"] == []


def test_a_file_that_is_no_index_is_refused(tmp_path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(timeline.IndexUnreadable):
        timeline.meta(str(junk))
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE meta (key TEXT, value TEXT)").connection.commit()
    with pytest.raises(timeline.IndexUnreadable):
        timeline.lanes(str(other))


def test_a_failed_build_leaves_no_file(tmp_path) -> None:
    def broken():
        yield {"ph": "X", "ts": 1.0, "dur": 1.0, "name": "a", "pid": 1, "tid": 1}
        raise OSError("the disk went away")

    with pytest.raises(OSError, match="the disk went away"):
        build_index("", str(tmp_path), events=broken())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        (("x", 2, 10), "start"),
        ((0, "nan", 10), "end"),
        ((5, 5, 10), "end"),
        ((0, 10, 0), "width"),
        ((0, 10, 10**6), "width"),
        ((0, 10, "wide"), "width"),
    ],
)
def test_a_bad_window_names_its_parameter(params, field) -> None:
    with pytest.raises(timeline.BadWindow) as bad:
        timeline.parse_window(*params)
    assert bad.value.field == field
