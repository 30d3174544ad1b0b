"""StepRecorder says a step began before its body runs, so the platform can name it live."""

from __future__ import annotations

from pathlib import Path

from workers.contract.events import STEP, STEP_STARTED
from workers.events import EventWriter, iter_events
from workers.kinds.base import StepFailed, StepRecorder


def test_each_step_that_runs_is_announced_before_its_body_even_by_a_buffering_writer(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.jsonl"
    # A writer that would otherwise hold events for a minute.
    steps = StepRecorder(EventWriter(str(path), buffer_s=60.0))
    seen_by_body: list[list[tuple[str, str]]] = []

    def body(fail: bool = False) -> dict:
        seen_by_body.append([(e["type"], e.get("name", "")) for e in iter_events(str(path))])
        if fail:
            raise StepFailed("no")
        return {}

    steps.run("device", body)
    steps.run("matmul", lambda: body(fail=True))
    steps.run("train", body, requires=("matmul",))
    steps.events.flush()

    # What the file held while each body ran: its own start, last.
    assert [seen[-1] for seen in seen_by_body] == [
        (STEP_STARTED, "device"),
        (STEP_STARTED, "matmul"),
    ]
    events = [(e["type"], e["name"]) for e in iter_events(str(path))]
    # A skipped step never began: it has no start, only its step event.
    assert events == [
        (STEP_STARTED, "device"),
        (STEP, "device"),
        (STEP_STARTED, "matmul"),
        (STEP, "matmul"),
        (STEP, "train"),
    ]
