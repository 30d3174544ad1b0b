"""The forwarder as a streaming shipper: batches while the file grows, pipelined bursts,
the file's bytes passed through as they are, and the JSON form for a platform without it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import wait_until
from tests.workers.host.fakes import FakePlatform, checkpoint_steps
from workers.contract.events import CHECKPOINT, EVENTS_FILE, RUNNER
from workers.events import EventWriter, iter_events
from workers.host import forwarder as forwarder_module
from workers.host import packing
from workers.host.client import PlatformUnavailable
from workers.host.forwarder import Forwarder

RUN, ATTEMPT = 7, 1


def forwarder(platform: FakePlatform, run_dir: Path, **options: Any) -> Forwarder:
    options.setdefault("poll_s", 60.0)
    return Forwarder(platform, RUN, ATTEMPT, str(run_dir), acted_on=(CHECKPOINT,), **options)


class Streaming:
    """What the host worker's supervisor does while its run lives: wait, then pump."""

    def __init__(self, fw: Forwarder) -> None:
        self.fw = fw
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                self.fw.wait(0.2, self.stop.is_set)
                self.fw.pump()
            except PlatformUnavailable:
                self.stop.wait(0.05)
            except BaseException as exc:
                self.errors.append(exc)
                return


@pytest.fixture
def streaming() -> Iterator[list[Streaming]]:
    started: list[Streaming] = []
    yield started
    for loop in started:
        loop.stop.set()
        loop.thread.join(timeout=30)
        assert loop.errors == []


def stream(started: list[Streaming], fw: Forwarder) -> Streaming:
    loop = Streaming(fw)
    started.append(loop)
    loop.thread.start()
    return loop


def test_a_batch_goes_out_while_the_file_still_grows(
    platform: FakePlatform, tmp_path: Path, streaming: list[Streaming]
) -> None:
    writer = EventWriter(str(tmp_path / EVENTS_FILE))
    stream(streaming, forwarder(platform, tmp_path, linger_s=0.01))
    step = 0
    # The writer goes on until the platform has stored something: it never pauses for it.
    while not platform.stored_events(RUN):
        writer.metrics(step, {"loss": 1.0 / (step + 1)})
        step += 1
        assert step < 10_000_000, "nothing was sent while the file grew"
    writer.metrics(step, {"loss": 0.0})
    writer.close()
    wait_until(lambda: len(platform.stored_events(RUN)) == step + 1, "every point")
    assert platform.stored_events(RUN) == list(iter_events(str(tmp_path / EVENTS_FILE)))
    assert len(platform.batches(RUN)) >= 2


def test_lines_wait_for_min_bytes_or_the_linger_before_a_request(
    platform: FakePlatform, tmp_path: Path
) -> None:
    writer = EventWriter(str(tmp_path / EVENTS_FILE))
    writer.log("stdout", "a first line")
    lingering = forwarder(platform, tmp_path, min_bytes=4096, linger_s=60.0)
    assert lingering.due() is False  # too little, too young
    assert lingering.wait(0.0) is False
    for index in range(100):
        writer.log("stdout", f"line {index}")
    assert lingering.due() is True  # enough for a request
    assert lingering.pump() is True
    assert platform.batches(RUN) == [(0, (tmp_path / EVENTS_FILE).stat().st_size, 101)]

    writer.log("stdout", "one more")
    writer.close()
    assert forwarder(platform, tmp_path, min_bytes=1 << 20, linger_s=0.0).due() is True


def test_a_line_still_being_written_is_not_polled_for_until_the_file_grows(
    platform: FakePlatform, tmp_path: Path
) -> None:
    path = tmp_path / EVENTS_FILE
    path.write_bytes(b'{"type": "log", "line": "half')
    fw = forwarder(platform, tmp_path, linger_s=0.0)
    assert fw.due() is True
    assert fw.pump() is False  # nothing complete: an empty poll, the first contact
    assert platform.batches(RUN) == [(0, 0, 0)]
    assert fw.due() is False  # nothing complete: no request until it grows
    with open(path, "ab") as handle:
        handle.write(b' written"}\n')
    assert fw.due() is True
    assert fw.pump() is True
    assert platform.stored_lines(RUN) == ["half written"]


class HeldPlatform(FakePlatform):
    """Holds the first events batch in flight until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = threading.Event()
        self.release = threading.Event()

    def send_lines(self, run_id: int, attempt: int, start: int, end: int, lines: bytes) -> Any:
        if not self.in_flight.is_set():
            self.in_flight.set()
            assert self.release.wait(30)
        return super().send_lines(run_id, attempt, start, end, lines)


def test_what_arrives_while_a_batch_is_in_flight_is_the_next_batch(
    tmp_path: Path, streaming: list[Streaming]
) -> None:
    platform = HeldPlatform()
    writer = EventWriter(str(tmp_path / EVENTS_FILE))
    writer.log("stdout", "first")
    first_end = (tmp_path / EVENTS_FILE).stat().st_size
    stream(streaming, forwarder(platform, tmp_path, min_bytes=1, linger_s=60.0))
    wait_until(platform.in_flight.is_set, "the first batch in flight")
    for index in range(50):
        writer.log("stdout", f"while in flight {index}")
    writer.close()
    platform.release.set()

    end = (tmp_path / EVENTS_FILE).stat().st_size
    wait_until(lambda: platform.offsets[RUN] == end, "the second batch")
    assert platform.batches(RUN) == [(0, first_end, 1), (first_end, end, 50)]


def test_a_burst_goes_out_in_back_to_back_batches_of_at_most_max_events(
    platform: FakePlatform, tmp_path: Path, streaming: list[Streaming]
) -> None:
    writer = EventWriter(str(tmp_path / EVENTS_FILE))
    for step in range(2500):
        writer.metrics(step, {"loss": 0.5})
    writer.close()
    # A linger of a minute: the full batches are due at once, one after the other.
    fw = forwarder(platform, tmp_path, max_events=1000, min_bytes=1000 * 60, linger_s=60.0)
    loop = stream(streaming, fw)
    wait_until(lambda: len(platform.batches(RUN)) >= 2, "two full batches")
    loop.stop.set()
    loop.thread.join(timeout=30)
    fw.drain()
    assert [count for _, _, count in platform.batches(RUN)] == [1000, 1000, 500]
    assert platform.stored_events(RUN) == list(iter_events(str(tmp_path / EVENTS_FILE)))


HOSTILE = [
    b'{"type":"metric","time":1.5,"key":"loss","step":0,"value":0.25}\n',
    b'{ "type" : "log" ,  "line": "spaced \\u00e9 \xc3\xa9 \\"checkpoint\\"", "time": 2}\n',
    b'{"type": "log", "line": "a NUL \\u0000 escaped"}\n',
    b"raw NUL \x00 in a line that is no JSON\n",
    b'{"type": "log", "line": "bad UTF-8 \xff\xfe"}\n',
    b"\n",
    b"[1, 2, 3]\n",
    b'{"no": "type"}\n',
    b'{"type": "metric", "key": "checkpoint", "step": 1, "value": 1.0}\n',
]


def test_the_lines_arrive_byte_identical_and_each_becomes_one_event(
    platform: FakePlatform, tmp_path: Path
) -> None:
    data = b"".join(HOSTILE)
    (tmp_path / EVENTS_FILE).write_bytes(data)
    fw = forwarder(platform, tmp_path, max_events=4)
    fw.drain()

    assert platform.received[RUN] == data
    stored = platform.stored_events(RUN)
    assert len(stored) == len(HOSTILE)
    assert stored[0] == {"type": "metric", "time": 1.5, "key": "loss", "step": 0, "value": 0.25}
    assert stored[1]["line"] == 'spaced é é "checkpoint"'
    assert stored[4]["line"] == "bad UTF-8 \ufffd\ufffd"
    runner_lines = [event["line"] for event in stored if event.get("stream") == RUNNER]
    assert runner_lines == [
        "raw NUL \x00 in a line that is no JSON",
        "",
        "[1, 2, 3]",
        '{"no": "type"}',
    ]
    # A metric keyed "checkpoint" is read, and is no checkpoint.
    assert checkpoint_steps(fw) == []


def test_a_line_longer_than_a_batch_goes_cut_in_the_json_form(
    platform: FakePlatform, tmp_path: Path
) -> None:
    writer = EventWriter(str(tmp_path / EVENTS_FILE))
    writer.log("stdout", "before")
    writer.close()
    with open(tmp_path / EVENTS_FILE, "ab") as handle:
        handle.write(b'{"type": "log", "line": "' + b"x" * 5000 + b'"}\n')
    writer = EventWriter(str(tmp_path / EVENTS_FILE))
    writer.log("stdout", "after")
    writer.close()
    forwarder(platform, tmp_path, max_bytes=1024).drain()

    lines = platform.stored_lines(RUN)
    assert lines[0] == "before"
    assert lines[-1] == "after"
    assert len(lines) == 3
    assert len(lines[1]) < 5000
    assert platform.offsets[RUN] == (tmp_path / EVENTS_FILE).stat().st_size


def test_a_platform_without_the_lines_form_gets_json_and_every_event_once(
    platform: FakePlatform, tmp_path: Path
) -> None:
    platform.takes_lines = False
    writer = EventWriter(str(tmp_path / EVENTS_FILE))
    for index in range(7):
        writer.log("stdout", f"line {index}")
    writer.emit("checkpoint", step=100, path="ckpt", bytes=1, sha256="0" * 64)
    writer.close()
    fw = forwarder(platform, tmp_path, max_events=3)
    fw.drain()

    assert platform.count("send_lines") == 1  # asked once, then JSON
    assert platform.received[RUN] == b""
    assert platform.stored_events(RUN) == list(iter_events(str(tmp_path / EVENTS_FILE)))
    assert checkpoint_steps(fw) == [100]


def test_metric_lines_go_packed_and_store_as_their_lines_would(
    platform: FakePlatform, tmp_path: Path
) -> None:
    platform.takes_blocks = True
    writer = EventWriter(str(tmp_path / EVENTS_FILE))
    for step in range(50):
        writer.metrics(step, {"loss": 1.0 / (step + 1), "nan": float("nan")})
        if step % 20 == 0:
            writer.log("stdout", f"at {step}")
            writer.emit("checkpoint", step=step, path="ckpt", bytes=1, sha256="0" * 64)
    writer.close()
    fw = forwarder(platform, tmp_path, max_events=30)
    fw.drain()

    assert platform.count("send_events") > 1
    assert platform.received[RUN] == b""  # never in the lines form
    assert platform.offsets[RUN] == (tmp_path / EVENTS_FILE).stat().st_size
    assert checkpoint_steps(fw) == [0, 20, 40]
    # Each run of metric lines comes as a block per key: ordered by key within a run.
    expected = [
        dict({key: value for key, value in event.items() if key != "nonfinite"}, source="track")
        if event["type"] == "metric"
        else event
        for event in iter_events(str(tmp_path / EVENTS_FILE))
    ]
    stored = platform.stored_events(RUN)

    def order(events: list[dict[str, Any]]) -> list[Any]:
        return sorted(events, key=lambda event: (event.get("step", -1), event.get("key", "")))

    assert order(stored) == order(expected)
    assert [event["type"] for event in stored if event["type"] != "metric"] == [
        "log",
        "checkpoint",
    ] * 3


def test_a_platform_without_the_compact_form_gets_the_lines(
    platform: FakePlatform, tmp_path: Path
) -> None:
    writer = EventWriter(str(tmp_path / EVENTS_FILE))
    for step in range(10):
        writer.metrics(step, {"loss": 0.5})
    writer.close()
    fw = forwarder(platform, tmp_path, max_events=4)
    fw.drain()

    assert platform.count("send_blocks") == 1  # asked once, then lines
    assert platform.received[RUN] == (tmp_path / EVENTS_FILE).read_bytes()
    assert platform.stored_events(RUN) == list(iter_events(str(tmp_path / EVENTS_FILE)))


class PackingWatched(FakePlatform):
    """Takes the compact form, and holds its first batch until the forwarder has packed the
    one after it (or a generous deadline passes): what a platform busy storing sees."""

    def __init__(self, packed: threading.Semaphore) -> None:
        super().__init__()
        self.takes_blocks = True
        self.packed = packed
        self.next_packed_in_flight: bool | None = None

    def send_blocks(self, run_id: int, attempt: int, start: int, end: int, frames: bytes) -> Any:
        if self.next_packed_in_flight is None:
            # This batch's own packing, then the next one's.
            self.next_packed_in_flight = all(self.packed.acquire(timeout=30) for _ in range(2))
        return super().send_blocks(run_id, attempt, start, end, frames)


def a_backlog(run_dir: Path, steps: int = 400) -> Path:
    path = run_dir / EVENTS_FILE
    writer = EventWriter(str(path))
    for step in range(steps):
        writer.metrics(step, {"loss": 1.0 / (step + 1)})
        if step % 150 == 0:
            writer.log("stdout", f"at {step}")
    writer.close()
    return path


def test_while_a_backlog_waits_the_next_batch_is_packed_during_the_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = a_backlog(tmp_path)
    packs = threading.Semaphore(0)

    def counted(data: bytes) -> tuple[bytes, int]:
        found = packing.pack(data)
        packs.release()
        return found

    monkeypatch.setattr(forwarder_module, "pack", counted)
    platform = PackingWatched(packs)
    fw = forwarder(platform, tmp_path, max_bytes=4096)
    fw.drain()

    assert platform.next_packed_in_flight is True
    assert len(platform.batches(RUN)) > 3
    assert platform.offsets[RUN] == path.stat().st_size
    assert [e["step"] for e in platform.stored_events(RUN) if e["type"] == "metric"] == list(
        range(400)
    )


@pytest.mark.parametrize("trouble", ["lost replies", "no compact form"])
def test_a_batch_read_ahead_is_sent_only_from_the_offset_the_platform_holds(
    platform: FakePlatform, tmp_path: Path, trouble: str
) -> None:
    # A reply lost after the platform stored the batch: the batch read ahead starts past
    # what the forwarder holds, and the batch is sent again (409, resumed). A platform
    # without the compact form refuses the packed batch: the one read ahead is packed too.
    path = a_backlog(tmp_path)
    if trouble == "lost replies":
        platform.takes_blocks = True
        platform.lose_next_reply("send_events", times=3)
    fw = forwarder(platform, tmp_path, max_bytes=4096)
    fw.drain()

    assert platform.offsets[RUN] == path.stat().st_size
    # Each batch from where the one before ended (a batch sent again is one batch).
    sent = list(dict.fromkeys((start, end) for start, end, _ in platform.batches(RUN)))
    assert [start for start, _ in sent] == [0, *[end for _, end in sent][:-1]]
    metrics = [event for event in platform.stored_events(RUN) if event["type"] == "metric"]
    assert [event["step"] for event in metrics] == list(range(400))
    if trouble == "no compact form":
        assert platform.received[RUN] == path.read_bytes()
