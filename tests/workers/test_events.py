from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

from workers.events import MAX_LINE_CHARS, EventWriter, iter_events, read_batch


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_event_has_type_and_time(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    writer = EventWriter(str(path))
    writer.log("stdout", "hello")
    writer.metric("loss", 3, 0.5)
    writer.step("device", "pass", 0.1234567, detail={"count": 1})
    writer.result("succeeded", "ok", {"a": 1})
    writer.close()
    events = lines(path)
    assert [event["type"] for event in events] == ["log", "metric", "step", "result"]
    assert all(isinstance(event["time"], float) for event in events)
    assert events[1] == {**events[1], "key": "loss", "step": 3, "value": 0.5}
    assert events[2]["seconds"] == 0.123457
    assert events[3]["summary"] == {"a": 1}


def test_non_finite_metrics_stay_valid_json(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    writer = EventWriter(str(path))
    writer.metric("loss", 1, float("nan"))
    writer.metric("loss", 2, float("-inf"))
    writer.close()
    # json.loads with no NaN support: the file is strict JSON.
    events = [json.loads(line, parse_constant=lambda c: 1 / 0) for line in path.open()]
    assert [(e["value"], e["nonfinite"]) for e in events] == [(None, "nan"), (None, "-inf")]


def test_huge_log_lines_are_cut(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    writer = EventWriter(str(path))
    writer.log("stdout", "x" * (MAX_LINE_CHARS + 10))
    writer.close()
    assert lines(path)[0]["line"].endswith("[... 10 chars cut]")


def test_read_batch_leaves_a_half_written_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"type": "log", "time": 1, "line": "a"}\n{"type": "log", "ti')
    events, end = read_batch(str(path), 0)
    assert [event["line"] for event in events] == ["a"]
    assert end == len('{"type": "log", "time": 1, "line": "a"}\n')
    assert read_batch(str(path), end) == ([], end)


def test_read_batch_respects_the_event_limit_and_resumes(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    writer = EventWriter(str(path))
    for step in range(10):
        writer.metric("m", step, step)
    writer.close()
    first, offset = read_batch(str(path), 0, max_events=4)
    rest, end = read_batch(str(path), offset)
    assert [e["step"] for e in first + rest] == list(range(10))
    assert end == path.stat().st_size


def test_a_line_that_is_not_an_event_is_kept_as_text(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('not json at all\n[1, 2]\n{"type": "heartbeat", "time": 2}\n')
    events = list(iter_events(str(path)))
    assert [e["type"] for e in events] == ["log", "log", "heartbeat"]
    assert events[0]["line"] == "not json at all"
    assert events[0]["stream"] == "runner"


def test_read_batch_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_batch(str(tmp_path / "none.jsonl"), 0) == ([], 0)


def _append(path: str, writer_id: int) -> None:
    writer = EventWriter(path)
    for index in range(300):
        writer.log("stdout", f"{writer_id}:{index}:" + "y" * 2000)
    writer.close()


def test_several_processes_appending_never_interleave_lines(tmp_path: Path) -> None:
    path = str(tmp_path / "events.jsonl")
    processes = [multiprocessing.Process(target=_append, args=(path, i)) for i in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    events = lines(Path(path))
    assert len(events) == 1200
    for writer_id in range(4):
        mine = [e["line"].split(":")[1] for e in events if e["line"].startswith(f"{writer_id}:")]
        assert mine == [str(index) for index in range(300)]
