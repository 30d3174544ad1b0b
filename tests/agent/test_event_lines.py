"""The events endpoint's lines form: the bytes of events.jsonl as they are, offsets in the query."""

from __future__ import annotations

from typing import Any

import pytest

from npulab.runs.models import Run, RunEvent
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_submit_run
from workers.contract.events import NDJSON, RUNNER

pytestmark = pytest.mark.django_db
AGENT = "/api/v1/agent"


@pytest.fixture
def run(owner: Any, cpu_host: Any, host_api: Any) -> Run:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    place_queued_runs()
    host_api.post(f"{AGENT}/runs/{run.pk}/claim/", {"attempt": 1}, format="json")
    return run


def post_lines(host_api: Any, run: Run, start: int, body: bytes, end: int | None = None) -> Any:
    end = start + len(body) if end is None else end
    return host_api.post(
        f"{AGENT}/runs/{run.pk}/events/?attempt=1&start={start}&end={end}",
        body,
        content_type=NDJSON,
    )


def test_lines_are_stored_like_the_json_form_and_acknowledged(host_api, run) -> None:
    body = (
        b'{"type": "log", "time": 2.0, "stream": "stdout", "line": "hello"}\n'
        b'{"type": "step", "time": 3.0, "name": "matmul", "status": "pass", "seconds": 0.5}\n'
    )
    response = post_lines(host_api, run, 0, body)
    assert response.status_code == 200, response.content
    assert response.json() == {"ack": len(body), "cancel": False}
    rows = list(RunEvent.objects.filter(run=run).order_by("pk").values_list("type", "data"))
    assert rows == [
        ("log", {"stream": "stdout", "line": "hello"}),
        ("step", {"name": "matmul", "status": "pass", "seconds": 0.5}),
    ]
    # Then the JSON form goes on from the same offset: either form, one file.
    batch = {"attempt": 1, "start": len(body), "end": len(body) + 10, "events": []}
    assert host_api.post(f"{AGENT}/runs/{run.pk}/events/", batch, format="json").status_code == 200


def test_hostile_lines_become_runner_log_lines_and_the_batch_is_applied(host_api, run) -> None:
    body = (
        b"not json at all\n"
        b"raw NUL \x00 here\n"
        b'{"type": "log", "line": "escaped NUL \\u0000 and bad UTF-8 \xff"}\n'
        b"\n"
        b'{"type": "log", "stream": "stdout", "line": "last"}\n'
    )
    response = post_lines(host_api, run, 0, body)
    assert response.status_code == 200, response.content
    lines = [
        (data.get("stream"), data["line"])
        for data in RunEvent.objects.filter(run=run).order_by("pk").values_list("data", flat=True)
    ]
    assert lines[0] == (RUNNER, "not json at all")
    assert lines[1][0] == RUNNER
    assert lines[1][1].startswith("raw NUL ")
    assert lines[2][1].startswith("escaped NUL ")
    assert lines[2][1].endswith("bad UTF-8 \ufffd")
    assert lines[3] == (RUNNER, "")
    assert lines[4] == ("stdout", "last")
    assert Run.objects.get(pk=run.pk).events_offset == len(body)


def test_a_repeated_batch_is_acknowledged_again_and_a_gap_is_409(host_api, run) -> None:
    body = b'{"type": "log", "line": "once"}\n'
    assert post_lines(host_api, run, 0, body).status_code == 200
    again = post_lines(host_api, run, 0, body)
    assert again.status_code == 200
    assert again.json()["ack"] == len(body)
    assert RunEvent.objects.filter(run=run).count() == 1
    gap = post_lines(host_api, run, len(body) + 5, body)
    assert gap.status_code == 409
    assert gap.json()["expected_start"] == len(body)


@pytest.mark.parametrize(
    ("body", "start", "end", "says"),
    [
        (b'{"type": "log", "line": "x"}\n', 0, 5, "bytes"),
        (b'{"type": "log", "line": "no newline"}', 0, None, "newline"),
    ],
)
def test_a_body_that_is_not_the_bytes_from_start_to_end_is_400(
    host_api, run, body: bytes, start: int, end: int | None, says: str
) -> None:
    response = post_lines(host_api, run, start, body, end)
    assert response.status_code == 400
    assert says in str(response.json())
    assert not RunEvent.objects.filter(run=run).exists()


def test_more_lines_than_a_batch_may_hold_is_400(host_api, run, settings) -> None:
    settings.NPULAB = dict(settings.NPULAB, MAX_EVENTS_PER_BATCH=100)
    response = post_lines(host_api, run, 0, b'{"type": "heartbeat"}\n' * 101)
    assert response.status_code == 400
    assert "at most 100 events" in str(response.json())


def test_lines_without_the_offsets_are_400(host_api, run) -> None:
    response = host_api.post(
        f"{AGENT}/runs/{run.pk}/events/", b'{"type": "heartbeat"}\n', content_type=NDJSON
    )
    assert response.status_code == 400
    assert {"attempt", "start", "end"} <= set(response.json())
