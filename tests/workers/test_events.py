from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from workers import events as events_module
from workers.events import KEY_CACHE_SIZE, MAX_LINE_CHARS, EventWriter, iter_events, read_batch


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


def strict(line: str) -> dict:
    """One event, refusing NaN and Infinity as the platform's JSON does not know them."""
    return json.loads(line, parse_constant=lambda constant: pytest.fail(constant))


KEYS = ["loss", "grüße/λ", "emoji 🎉", 'say "hi"', "back\\slash", "tab\tnew\nline", "\x01\u2028"]


def read_lines(path: Path) -> list[str]:
    # Only newline ends a line: str.splitlines would also split at U+2028.
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def test_metrics_lines_are_the_events_emit_would_write(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    writer = EventWriter(str(path))
    values = [0.5, 3, -0.0, 1e300, 2.5e-8, float("nan"), float("inf"), float("-inf")]
    keys = [*KEYS, "last"]
    writer.metrics(2**40, dict(zip(keys, values, strict=True)))
    writer.close()
    text = read_lines(path)
    events = [strict(line) for line in text]
    assert [(e["type"], e["key"], e["step"]) for e in events] == [
        ("metric", key, 2**40) for key in keys
    ]
    assert [e["value"] for e in events] == [0.5, 3.0, -0.0, 1e300, 2.5e-8, None, None, None]
    assert [e.get("nonfinite") for e in events[-3:]] == ["nan", "inf", "-inf"]
    assert "nonfinite" not in events[0]
    # Byte for byte what json.dumps writes for the same event, as emit did before.
    assert text == [json.dumps(e, ensure_ascii=False, allow_nan=False) for e in events]
    # Logged together: one time for the step.
    assert len({e["time"] for e in events}) == 1


def test_metric_and_emit_agree(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    writer = EventWriter(str(path))
    for key in KEYS:
        writer.metric(key, 7, 1.25)
        writer.emit("metric", key=key, step=7, value=1.25)
    writer.close()
    events = [strict(line) for line in read_lines(path)]
    assert len(events) == 2 * len(KEYS)
    for ours, emitted in zip(events[::2], events[1::2], strict=True):
        # Same fields in the same order: only the time may differ.
        assert list({**ours, "time": 0}.items()) == list({**emitted, "time": 0}.items())


def test_metrics_of_nothing_write_nothing(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    writer = EventWriter(str(path))
    writer.metrics(1, {})
    writer.close()
    assert path.read_bytes() == b""


def test_the_key_cache_stays_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events_module, "_QUOTED_KEYS", {})
    path = tmp_path / "events.jsonl"
    writer = EventWriter(str(path), buffer_s=1.0)
    count = KEY_CACHE_SIZE * 2
    for index in range(count):
        writer.metrics(index, {f"key/{index}": index, "loss": 1.0})
    writer.close()
    assert len(events_module._QUOTED_KEYS) == KEY_CACHE_SIZE
    events = list(iter_events(str(path)))
    # Keys beyond the cache are still written right.
    assert [e["key"] for e in events[-2:]] == [f"key/{count - 1}", "loss"]
    assert len(events) == 2 * count


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
