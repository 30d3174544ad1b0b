"""The events endpoint's compact form: runs of metric lines packed as columns, offsets in the
query; stored as the same lines sent as they are would be, and checked as strictly."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest

from npulab.runs.models import Run, RunEvent
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_submit_run
from npulab.series.models import MetricSeries
from npulab.series.owners import Owner
from npulab.series.reads import find, whole
from workers.contract.blocks import BLOCKS, block_frame, lines_frame
from workers.contract.events import RUNNER
from workers.events import EventWriter
from workers.host.packing import pack

pytestmark = pytest.mark.django_db
AGENT = "/api/v1/agent"


@pytest.fixture
def run(owner: Any, cpu_host: Any, host_api: Any) -> Run:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    place_queued_runs()
    host_api.post(f"{AGENT}/runs/{run.pk}/claim/", {"attempt": 1}, format="json")
    return run


def post_blocks(host_api: Any, run: Run, start: int, end: int, body: bytes) -> Any:
    return host_api.post(
        f"{AGENT}/runs/{run.pk}/events/?attempt=1&start={start}&end={end}",
        body,
        content_type=BLOCKS,
    )


def columns(steps: list[int], values: list[float], times: list[float]) -> bytes:
    n = len(steps)
    return struct.pack(f"<{n}q{n}d{n}d", *steps, *values, *times)


def block(key: str, steps: list[int], values: list[float], times: list[float]) -> bytes:
    return block_frame(key, "track", len(steps), columns(steps, values, times))


def read(run: Run, key: str) -> list[tuple[int, float | None, float]]:
    found = find(Owner.of_run(run.pk), key)
    assert found is not None, f"no series {key}"
    page = whole(found).columns
    return [
        (step, None if math.isnan(value) else value, time)
        for step, value, time in zip(
            page["step"].tolist(), page["value"].tolist(), page["time"].tolist(), strict=True
        )
    ]


def ingest_errors(run: Run) -> list[str]:
    lines = RunEvent.objects.filter(run=run, type="log").order_by("pk")
    return [data["line"] for data in lines.values_list("data", flat=True)]


def test_a_packed_file_stores_what_its_lines_store(host_api, run, tmp_path) -> None:
    """An events.jsonl packed as the forwarder packs it: every point of its metric lines,
    as JSON reads them, and its other lines; the offset is the file's."""
    path = tmp_path / "events.jsonl"
    writer = EventWriter(str(path))
    for step in range(300):
        writer.metrics(step, {"loss": 1.0 / (step + 1), "lr": 0.5, "größe": step})
        if step % 100 == 50:
            writer.log("stdout", f"step {step}")
            writer.metrics(step, {"loss": float("nan"), "acc": float("inf")})
    writer.close()
    data = path.read_bytes()
    body, packed = pack(data)
    assert packed == 3 * 300 + 6
    assert len(body) < len(data) / 2

    response = post_blocks(host_api, run, 0, len(data), body)
    assert response.status_code == 200, response.content
    assert response.json()["ack"] == len(data)
    assert Run.objects.get(pk=run.pk).events_offset == len(data)

    expected: dict[str, list[tuple[int, float | None, float]]] = {}
    for event in map(json.loads, data.splitlines()):
        if event["type"] == "metric":
            point = (event["step"], event["value"], event["time"])
            expected.setdefault(event["key"], []).append(point)
    for key, points in expected.items():
        assert read(run, key) == sorted(points, key=lambda point: point[0]), key
    assert ingest_errors(run) == ["step 50", "step 150", "step 250"]


def test_steps_out_of_order_are_stored_in_step_order_repeats_as_sent(host_api, run) -> None:
    body = block("loss", [5, 3, 9, 3], [0.5, 0.3, 0.9, 0.33], [1.0, 2.0, 3.0, 4.0])
    assert post_blocks(host_api, run, 0, 100, body).status_code == 200
    assert read(run, "loss") == [(3, 0.3, 2.0), (3, 0.33, 4.0), (5, 0.5, 1.0), (9, 0.9, 3.0)]


def test_nan_and_infinities_are_stored_as_no_value_and_a_bad_time_as_now(host_api, run) -> None:
    nan, inf = float("nan"), float("inf")
    body = block("loss", [1, 2, 3, 4], [nan, inf, -inf, 1.5], [1.0, 2.0, 3.0, nan])
    assert post_blocks(host_api, run, 0, 100, body).status_code == 200
    points = read(run, "loss")
    assert [(step, value) for step, value, _ in points] == [
        (1, None),
        (2, None),
        (3, None),
        (4, 1.5),
    ]
    assert points[3][2] > 1e9  # the batch's time
    assert MetricSeries.objects.get(run=run, key="loss").points == 4


@pytest.mark.parametrize(
    ("frame", "says"),
    [
        # A key of 10,000 characters.
        (block("k" * 10_000, [1], [1.0], [1.0]), "key is a printable string of 1 to 200"),
        (block("bad\x00key", [1], [1.0], [1.0]), "key is a printable string"),
        (block_frame("loss", "bogus", 1, columns([1], [1.0], [1.0])), "source must be one of"),
        # Lengths that do not match: columns cut short, too long, a count that is no count.
        (
            block_frame("loss", "track", 3, columns([1, 2], [1.0, 2.0], [1.0, 2.0])),
            "3 points holds 72 bytes, this one 48",
        ),
        (
            block_frame("loss", "track", 1, columns([1, 2], [1.0, 2.0], [1.0, 2.0])),
            "1 points holds 24 bytes, this one 48",
        ),
        (block_frame("loss", "track", 1, columns([1], [1.0], [1.0])[:-3]), "this one 21"),
        (block_frame("loss", "track", 0, b""), "points, a positive count"),
        (
            b'{"size":24,"key":"loss","points":true}\n' + columns([1], [1.0], [1.0]),
            "points, a positive count",
        ),
        (block("loss", [-(2**63)], [1.0], [1.0]), "steps must be at least"),
    ],
)
def test_a_bad_block_is_an_ingest_error_and_the_rest_of_the_batch_lands(
    host_api, run, frame: bytes, says: str
) -> None:
    body = (
        block("before", [1, 2], [1.0, 2.0], [1.0, 2.0])
        + frame
        + lines_frame(b'{"type": "log", "stream": "stdout", "line": "after"}\n')
        + block("after", [7], [7.0], [7.0])
    )
    response = post_blocks(host_api, run, 0, 1000, body)
    assert response.status_code == 200, response.content
    errors = ingest_errors(run)
    assert len(errors) == 2, errors
    assert errors[0].startswith("malformed event (")
    assert says in errors[0]
    assert errors[1] == "after"
    assert [step for step, _, _ in read(run, "before")] == [1, 2]
    assert read(run, "after") == [(7, 7.0, 7.0)]
    assert set(MetricSeries.objects.filter(run=run).values_list("key", flat=True)) == {
        "before",
        "after",
    }
    assert Run.objects.get(pk=run.pk).events_offset == 1000


@pytest.mark.parametrize(
    ("tail", "says"),
    [
        # A truncated block: the body ends inside its columns.
        (block("loss", [1, 2, 3], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0])[:-10], "cut short"),
        # Its header cut, or never one.
        (b'{"size":24,"key":"lo', "a frame header is a line"),
        (b"[24]\n" + columns([1], [1.0], [1.0]), "one JSON object"),
        (b'{"size":-1}\n', "needs size"),
        (b'{"size":5}\nabc\nd', "must end with a newline"),
    ],
)
def test_a_truncated_or_unreadable_frame_is_an_ingest_error_after_what_came_before(
    host_api, run, tail: bytes, says: str
) -> None:
    body = block("before", [1, 2], [1.0, 2.0], [1.0, 2.0]) + tail
    response = post_blocks(host_api, run, 0, 1000, body)
    assert response.status_code == 200, response.content
    errors = ingest_errors(run)
    assert len(errors) == 1, errors
    assert says in errors[0]
    assert [step for step, _, _ in read(run, "before")] == [1, 2]


def test_a_block_of_another_source_is_its_own_series(host_api, run) -> None:
    body = block("loss", [1], [1.0], [1.0]) + block_frame(
        "loss", "tensorboard", 1, columns([1], [2.0], [1.0])
    )
    assert post_blocks(host_api, run, 0, 100, body).status_code == 200
    stored = MetricSeries.objects.filter(run=run).order_by("source")
    assert list(stored.values_list("source", "key", "points")) == [
        ("tensorboard", "loss", 1),
        ("track", "loss", 1),
    ]


def test_more_points_than_a_batch_may_hold_is_400(host_api, run, settings) -> None:
    settings.NPULAB = dict(settings.NPULAB, MAX_EVENTS_PER_BATCH=100)
    body = block("loss", list(range(90)), [1.0] * 90, [1.0] * 90) + lines_frame(
        b'{"type": "heartbeat"}\n' * 11
    )
    response = post_blocks(host_api, run, 0, 1000, body)
    assert response.status_code == 400
    assert "at most 100 events" in str(response.json())
    assert not MetricSeries.objects.filter(run=run).exists()


def test_a_repeated_batch_is_acknowledged_again_and_stored_once(host_api, run) -> None:
    body = block("loss", [1, 2], [1.0, 2.0], [1.0, 2.0])
    assert post_blocks(host_api, run, 0, 50, body).status_code == 200
    again = post_blocks(host_api, run, 0, 50, body)
    assert again.status_code == 200
    assert again.json()["ack"] == 50
    assert MetricSeries.objects.get(run=run, key="loss").points == 2
    gap = post_blocks(host_api, run, 60, 90, body)
    assert gap.status_code == 409
    assert gap.json()["expected_start"] == 50


def test_a_hostile_line_in_a_lines_frame_is_a_runner_log_line(host_api, run) -> None:
    body = lines_frame(b"not json\n") + block("loss", [1], [1.0], [1.0])
    assert post_blocks(host_api, run, 0, 30, body).status_code == 200
    assert RunEvent.objects.get(run=run).data == {"stream": RUNNER, "line": "not json"}
