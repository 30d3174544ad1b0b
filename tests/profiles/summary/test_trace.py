"""iter_events: every event of a trace, one at a time, whatever its form."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from npulab.profiles.summary import trace as trace_module
from npulab.profiles.summary.trace import Trace, TraceError, iter_events, trace_files
from tests.profiles.summary.conftest import ASCEND_PT

EVENTS = [
    {
        "ph": "X",
        "name": "aten::add",
        "pid": 1,
        "tid": 1,
        "ts": 10.5,
        "dur": 2.25,
        "cat": "cpu_op",
        "args": {"a": "}, {"},
    },
    {"ph": "X", "name": "k", "pid": 0, "tid": 7, "ts": "1723545784535521.354", "dur": "40.3"},
    {"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": 12},
]


def _expected() -> list[dict]:
    out = json.loads(json.dumps(EVENTS))
    out[1]["ts"] = float("1723545784535521.354")
    out[1]["dur"] = 40.3
    return out


def test_reads_the_object_form_with_keys_before_and_after_the_events(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(
        json.dumps(
            {
                "schemaVersion": 1,
                "distributedInfo": {"rank": 3},
                "traceEvents": EVENTS,
                "traceName": "x",
            }
        )
    )
    trace = Trace(path)
    assert list(trace.events()) == _expected()
    assert trace.meta == {"schemaVersion": 1, "distributedInfo": {"rank": 3}, "traceName": "x"}
    assert trace.rank == 3
    assert trace.form == "object"


def test_reads_the_array_form_and_gzip_whatever_the_file_is_called(tmp_path: Path) -> None:
    path = tmp_path / "trace_view.json"
    with gzip.open(path, "wt") as out:
        json.dump(EVENTS, out)
    assert list(iter_events(path)) == _expected()


def test_the_same_events_at_every_chunk_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pretty-printed like Kineto, a string holding the event separator, a number cut anywhere.
    events = [dict(EVENTS[0], ts=i + 0.125, name=f"op{i}") for i in range(40)]
    path = tmp_path / "t.json"
    path.write_text(
        json.dumps(
            {"schemaVersion": 12345, "traceEvents": events, "displayTimeUnit": "ms"}, indent=2
        )
    )
    expected = json.loads(path.read_text())
    for chunk in (1, 7, 64, 333):
        monkeypatch.setattr(trace_module, "CHUNK_CHARS", chunk)
        trace = Trace(path)
        assert list(trace.events()) == expected["traceEvents"], chunk
        assert trace.meta == {"schemaVersion": 12345, "displayTimeUnit": "ms"}


def test_a_value_orjson_refuses_is_decoded_as_the_standard_library_does(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(
        '{"traceEvents": [{"ph": "X", "ts": 1, "dur": NaN, '
        '"big": 123456789012345678901234567890}, {"ph": "X", "ts": 2, "dur": 1}]}'
    )
    events = list(iter_events(path))
    assert events[0]["big"] == 123456789012345678901234567890
    assert events[0]["dur"] != events[0]["dur"]  # NaN
    assert events[1] == {"ph": "X", "ts": 2, "dur": 1}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ("hello", "not a JSON trace"),
        ('{"traceEvents": [{"ph": "X", "ts": 1}, {"ph": ', "invalid JSON"),
        ('{"traceEvents": [{"ph": "X", "ts": 1}', "truncated"),
        ('[{"ph": "X"}] trailing', "unexpected text"),
    ],
)
def test_a_bad_trace_is_a_trace_error_naming_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(TraceError, match=message) as info:
        list(iter_events(path))
    # Its name, never the folder it sits in on the server: the page shows the message.
    assert str(info.value).startswith("bad.json: ")
    assert str(tmp_path) not in str(info.value)


def test_an_unreadable_trace_says_why_without_the_servers_path(tmp_path: Path) -> None:
    path = tmp_path / "gone.json"
    with pytest.raises(TraceError, match=r"gone\.json: no such file or folder") as info:
        list(iter_events(path))
    assert str(tmp_path) not in str(info.value)


def test_a_broken_gzip_is_a_trace_error(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(EVENTS).encode())[:-12])
    with pytest.raises(TraceError, match="cannot read"):
        list(iter_events(path))


def test_trace_files_finds_an_ascend_folder_and_a_folder_of_ranks(tmp_path: Path) -> None:
    assert trace_files(ASCEND_PT) == [ASCEND_PT / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"]
    assert trace_files(ASCEND_PT.parent) == [
        ASCEND_PT / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    ]
    (tmp_path / "rank1.json.gz").write_bytes(gzip.compress(b"[]"))
    (tmp_path / "rank0.json").write_text("[]")
    (tmp_path / "notes.txt").write_text("x")
    assert [p.name for p in trace_files(tmp_path)] == ["rank0.json", "rank1.json.gz"]
    with pytest.raises(TraceError, match="no such file"):
        trace_files(tmp_path / "missing")
    with pytest.raises(TraceError, match="no trace in this folder"):
        trace_files(tmp_path / "empty") if (tmp_path / "empty").mkdir() is None else None


def test_a_value_nested_too_deeply_is_a_trace_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    with pytest.raises(TraceError, match=r"nested too deeply|invalid JSON"):
        list(iter_events(path))
