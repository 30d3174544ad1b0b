"""The forwarder: events.jsonl to the platform exactly once, in order, through outages."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import wait_until
from tests.workers.host.fakes import FakePlatform, checkpoint_steps
from workers.contract.events import CHECKPOINT, EVENTS_FILE, LEAST_BATCH_EVENTS
from workers.events import EventWriter, iter_events
from workers.host.client import PlatformUnavailable
from workers.host.forwarder import OFFSET_FILE, Forwarder, RunGone, forward_left

RUN, ATTEMPT = 7, 1


def write_logs(run_dir: Path, *lines: str) -> None:
    writer = EventWriter(str(run_dir / EVENTS_FILE))
    for line in lines:
        writer.log("stdout", line)
    writer.close()


def write_event(run_dir: Path, type: str, **fields: Any) -> None:
    writer = EventWriter(str(run_dir / EVENTS_FILE))
    writer.emit(type, **fields)
    writer.close()


def file_events(run_dir: Path) -> list[dict[str, Any]]:
    return list(iter_events(str(run_dir / EVENTS_FILE)))


def file_size(run_dir: Path) -> int:
    return os.path.getsize(run_dir / EVENTS_FILE)


def persisted_offset(run_dir: Path) -> int:
    return int((run_dir / OFFSET_FILE).read_text())


@pytest.fixture
def platform() -> FakePlatform:
    return FakePlatform()


def forwarder(
    platform: FakePlatform, run_dir: Path, poll_s: float = 60.0, max_events: int = 5000
) -> Forwarder:
    return Forwarder(
        platform,
        RUN,
        ATTEMPT,
        str(run_dir),
        poll_s=poll_s,
        max_events=max_events,
        acted_on=(CHECKPOINT,),
    )


def test_pump_sends_new_events_from_the_acknowledged_offset_and_persists_it(
    platform: FakePlatform, tmp_path: Path
) -> None:
    write_logs(tmp_path, "one", "two")
    fw = forwarder(platform, tmp_path)
    assert fw.pump() is True
    first_end = file_size(tmp_path)
    write_logs(tmp_path, "three")
    assert fw.pump() is True

    assert platform.batches(RUN) == [(0, first_end, 2), (first_end, file_size(tmp_path), 1)]
    assert platform.stored_lines(RUN) == ["one", "two", "three"]
    assert fw.offset == persisted_offset(tmp_path) == file_size(tmp_path)
    assert not fw.pending()


def test_pump_with_nothing_new_waits_for_the_poll_interval_before_calling(
    platform: FakePlatform, tmp_path: Path
) -> None:
    write_logs(tmp_path, "one")
    fw = forwarder(platform, tmp_path, poll_s=60.0)
    assert fw.pump() is True
    assert fw.pump() is False
    assert platform.count("send_events") == 1


def test_an_empty_poll_when_due_carries_the_cancel_flag_and_pins(
    platform: FakePlatform, tmp_path: Path
) -> None:
    write_logs(tmp_path, "one")
    fw = forwarder(platform, tmp_path, poll_s=0.0)
    fw.pump()
    assert fw.cancel_requested is False
    assert fw.reply.get("pinned") == []

    platform.cancel.add(RUN)
    platform.pinned = [100, 300]
    assert fw.pump() is False  # nothing new, but the platform was asked
    assert platform.batches(RUN)[-1][2] == 0
    assert fw.cancel_requested is True
    assert fw.reply.get("pinned") == [100, 300]


def test_a_large_spool_is_sent_in_batches_of_max_events(
    platform: FakePlatform, tmp_path: Path
) -> None:
    write_logs(tmp_path, *(f"line {i}" for i in range(7)))
    fw = forwarder(platform, tmp_path, max_events=3)
    fw.drain()
    assert [count for _, _, count in platform.batches(RUN)] == [3, 3, 1]
    assert platform.stored_events(RUN) == file_events(tmp_path)


def test_unavailable_platform_leaves_events_spooled_and_the_offset_unchanged(
    platform: FakePlatform, tmp_path: Path
) -> None:
    write_logs(tmp_path, "one")
    fw = forwarder(platform, tmp_path)
    fw.pump()
    acknowledged = fw.offset
    write_logs(tmp_path, "two", "three")
    platform.go_down()

    with pytest.raises(PlatformUnavailable):
        fw.pump()
    assert fw.offset == persisted_offset(tmp_path) == acknowledged
    assert fw.pending()

    platform.come_back()
    assert fw.pump() is True
    assert platform.stored_lines(RUN) == ["one", "two", "three"]


def test_a_lost_reply_resends_the_same_batch_and_stores_it_once(
    platform: FakePlatform, tmp_path: Path
) -> None:
    write_logs(tmp_path, "one", "two")
    fw = forwarder(platform, tmp_path)
    platform.lose_next_reply("send_events")
    with pytest.raises(PlatformUnavailable):
        fw.pump()
    assert fw.offset == 0  # the platform stored it, but the forwarder cannot know

    assert fw.pump() is True
    assert platform.stored_lines(RUN) == ["one", "two"]
    assert fw.offset == file_size(tmp_path)


def test_a_lost_reply_then_more_events_resyncs_to_expected_start_without_duplicates(
    platform: FakePlatform, tmp_path: Path
) -> None:
    write_logs(tmp_path, "one", "two")
    stored_end = file_size(tmp_path)
    fw = forwarder(platform, tmp_path)
    platform.lose_next_reply("send_events")
    with pytest.raises(PlatformUnavailable):
        fw.pump()
    write_logs(tmp_path, "three")

    # The retry starts at 0 and runs past what the platform holds: 409, expected_start.
    assert fw.pump() is True
    assert fw.offset == persisted_offset(tmp_path) == stored_end
    fw.drain()

    assert platform.stored_lines(RUN) == ["one", "two", "three"]
    assert platform.stored_events(RUN) == file_events(tmp_path)


def test_a_409_with_expected_start_moves_the_offset_there(
    platform: FakePlatform, tmp_path: Path
) -> None:
    write_logs(tmp_path, "one", "two", "three")
    events = file_events(tmp_path)
    fw = forwarder(platform, tmp_path)
    fw.pump()
    # The platform holds less than the forwarder thinks (say its database was restored).
    first_line = len((tmp_path / EVENTS_FILE).read_bytes().splitlines(keepends=True)[0])
    with platform.lock:
        platform.offsets[RUN] = first_line
        del platform.stored[RUN][1:]

    write_logs(tmp_path, "four")
    assert fw.pump() is True
    assert fw.offset == first_line
    fw.drain()
    assert platform.stored_events(RUN) == events + file_events(tmp_path)[3:]


def test_a_restarted_forwarder_resumes_from_the_persisted_offset(
    platform: FakePlatform, tmp_path: Path
) -> None:
    write_logs(tmp_path, "one", "two")
    forwarder(platform, tmp_path).pump()
    sent = file_size(tmp_path)
    write_logs(tmp_path, "three")

    again = forwarder(platform, tmp_path)
    assert again.offset == sent
    again.pump()
    assert platform.batches(RUN)[-1] == (sent, file_size(tmp_path), 1)
    assert platform.stored_lines(RUN) == ["one", "two", "three"]


def test_a_missing_or_unreadable_offset_file_starts_from_the_beginning(
    platform: FakePlatform, tmp_path: Path
) -> None:
    write_logs(tmp_path, "one")
    assert forwarder(platform, tmp_path).offset == 0
    (tmp_path / OFFSET_FILE).write_text("not a number")
    assert forwarder(platform, tmp_path).offset == 0


def test_a_refusal_other_than_a_resync_is_run_gone(platform: FakePlatform, tmp_path: Path) -> None:
    write_logs(tmp_path, "one")
    fw = forwarder(platform, tmp_path)
    platform.reject("send_events", 409, {"detail": "run 7 is cancelled; no more events"})
    with pytest.raises(RunGone, match="cancelled"):
        fw.pump()
    platform.reject("send_events", 403, {"detail": "not this host's run"})
    with pytest.raises(RunGone, match="403"):
        fw.pump()
    assert fw.offset == 0


def test_drain_retries_through_an_outage_until_everything_is_stored(
    platform: FakePlatform, tmp_path: Path
) -> None:
    write_logs(tmp_path, "one", "two")
    fw = forwarder(platform, tmp_path)
    platform.go_down()
    errors: list[BaseException] = []

    def drain() -> None:
        try:
            fw.drain()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    wait_until(lambda: platform.failed["send_events"] >= 3, "three failed attempts")
    assert thread.is_alive()
    platform.come_back()
    thread.join(timeout=30)

    assert not thread.is_alive()
    assert errors == []
    assert platform.stored_events(RUN) == file_events(tmp_path)
    assert not fw.pending()


def test_drain_stops_promptly_once_give_up_is_set_and_keeps_the_spool(
    platform: FakePlatform, tmp_path: Path
) -> None:
    write_logs(tmp_path, "one", "two")
    fw = forwarder(platform, tmp_path)
    platform.go_down()
    give_up = threading.Event()
    errors: list[BaseException] = []

    def drain() -> None:
        try:
            fw.drain(give_up=give_up)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    wait_until(lambda: platform.failed["send_events"] >= 1, "a failed attempt")
    give_up.set()
    # Its back-off is at most 2 s; a prompt stop is well inside that plus a call.
    thread.join(timeout=5)

    assert not thread.is_alive()
    assert len(errors) == 1
    assert isinstance(errors[0], PlatformUnavailable)
    assert fw.offset == 0
    assert fw.pending()


def test_drain_with_give_up_already_set_still_sends_when_the_platform_is_up(
    platform: FakePlatform, tmp_path: Path
) -> None:
    write_logs(tmp_path, "one")
    give_up = threading.Event()
    give_up.set()
    forwarder(platform, tmp_path).drain(give_up=give_up)
    assert platform.stored_lines(RUN) == ["one"]


def test_drain_of_a_run_that_wrote_nothing_returns_without_error(
    platform: FakePlatform, tmp_path: Path
) -> None:
    forwarder(platform, tmp_path).drain()
    assert platform.stored_events(RUN) == []


def test_checkpoint_steps_are_taken_once_and_only_after_acknowledgement(
    platform: FakePlatform, tmp_path: Path
) -> None:
    write_event(tmp_path, "checkpoint", step=100, path="ckpt", bytes=1, sha256="0" * 64)
    fw = forwarder(platform, tmp_path)
    platform.go_down()
    with pytest.raises(PlatformUnavailable):
        fw.pump()
    assert checkpoint_steps(fw) == []

    platform.come_back()
    write_event(tmp_path, "checkpoint", step=200, path="ckpt", bytes=1, sha256="0" * 64)
    write_event(tmp_path, "checkpoint", step="not a step")
    fw.pump()
    assert checkpoint_steps(fw) == [100, 200]
    assert checkpoint_steps(fw) == []


def test_checkpoints_in_a_batch_acknowledged_through_a_resync_are_not_lost(
    platform: FakePlatform, tmp_path: Path
) -> None:
    # The platform stores the batch with the checkpoint, its reply is lost, and
    # the retry (with more events by then) is answered 409 expected_start: the
    # checkpoint is acknowledged all the same and must still be uploaded.
    write_event(tmp_path, "checkpoint", step=100, path="ckpt", bytes=1, sha256="0" * 64)
    fw = forwarder(platform, tmp_path)
    platform.lose_next_reply("send_events")
    with pytest.raises(PlatformUnavailable):
        fw.pump()
    write_logs(tmp_path, "after the checkpoint")
    fw.drain()

    assert platform.stored_events(RUN) == file_events(tmp_path)
    assert checkpoint_steps(fw) == [100]


def test_drain_seals_a_last_line_left_without_its_newline_and_ends(
    platform: FakePlatform, tmp_path: Path
) -> None:
    # The run's writer died mid-line (or a script wrote the file by hand).
    write_logs(tmp_path, "complete")
    with open(tmp_path / EVENTS_FILE, "ab") as handle:
        handle.write(b'{"type": "log", "line": "cut')
    fw = forwarder(platform, tmp_path)
    done = threading.Event()

    def drain() -> None:
        fw.drain()
        done.set()

    threading.Thread(target=drain, daemon=True).start()
    wait_until(done.is_set, "drain to end instead of spinning on the unfinished line")
    assert not fw.pending()
    lines = [event["line"] for event in platform.stored[RUN]]
    assert lines[0] == "complete"
    assert "cut" in lines[1]  # kept, as the runner's note of a line that is not JSON


def left_attempt(work: Path, run_id: int, attempt: int, *lines: str) -> Path:
    run_dir = work / "runs" / str(run_id) / f"attempt-{attempt}"
    run_dir.mkdir(parents=True)
    write_logs(run_dir, *lines)
    return run_dir


def test_what_left_attempts_had_not_sent_goes_in_the_smallest_batches_a_platform_takes(
    platform: FakePlatform, tmp_path: Path
) -> None:
    lines = [f"line {n}" for n in range(LEAST_BATCH_EVENTS * 2 + 1)]
    first = left_attempt(tmp_path, RUN, ATTEMPT, *lines)
    # Half of it sent by the earlier process, its offset persisted as it left it.
    Forwarder(platform, RUN, ATTEMPT, str(first), max_events=LEAST_BATCH_EVENTS).pump()
    sent_before = len(platform.batches(RUN))
    second = left_attempt(tmp_path, 8, 3, "all of it")
    # Not an attempt's folder: passed over.
    stray = tmp_path / "runs" / "9" / "notes"
    stray.mkdir(parents=True)

    forward_left(platform, [str(first), str(stray), str(second)])

    assert platform.stored_lines(RUN) == lines
    assert platform.stored_lines(8) == ["all of it"]
    assert all(events <= LEAST_BATCH_EVENTS for _, _, events in platform.batches(RUN))
    assert len(platform.batches(RUN)) - sent_before == 2
    assert persisted_offset(first) == file_size(first)


def test_an_attempt_the_platform_no_longer_wants_is_passed_over(
    platform: FakePlatform, tmp_path: Path
) -> None:
    refused = left_attempt(tmp_path, RUN, ATTEMPT, "refused")
    platform.reject("send_events", 409, {"detail": "run 7 is lost; no more events are taken"})

    forward_left(platform, [str(refused)])

    assert platform.stored_events(RUN) == []
    assert persisted_offset_or_none(refused) is None


def test_an_unreachable_platform_is_given_up_on_and_the_spool_kept(
    platform: FakePlatform, tmp_path: Path
) -> None:
    left = [left_attempt(tmp_path, RUN, ATTEMPT, "one"), left_attempt(tmp_path, 8, 1, "two")]
    platform.go_down()
    done = threading.Event()
    thread = threading.Thread(
        target=lambda: (forward_left(platform, [str(d) for d in left], 0.5), done.set()),
        daemon=True,
    )
    thread.start()
    # The first attempt is retried until the time given for all of them is out.
    thread.join(timeout=60)
    assert done.is_set()
    assert platform.failed["send_events"] >= 1
    assert all(persisted_offset_or_none(run_dir) is None for run_dir in left)
    assert [e["line"] for e in file_events(left[0])] == ["one"]


def test_a_flooded_spool_holds_the_start_no_longer_than_the_time_given(
    platform: FakePlatform, tmp_path: Path
) -> None:
    # A run that wrote on while no worker forwarded it may have written any amount.
    flooded = left_attempt(tmp_path, RUN, ATTEMPT, *(f"flood {n}" for n in range(1000)))
    forward_left(platform, [str(flooded)], give_up_after_s=0)
    assert platform.stored_events(RUN) == []
    # Given the time, the same spool goes whole.
    forward_left(platform, [str(flooded)])
    assert platform.stored_lines(RUN) == [f"flood {n}" for n in range(1000)]


def persisted_offset_or_none(run_dir: Path) -> int | None:
    return persisted_offset(run_dir) if (run_dir / OFFSET_FILE).exists() else None


# -- a run's links: the worker, often root, reads and writes only the run's own files ------


def secret_file(tmp_path: Path) -> tuple[Path, str]:
    """A file the run has no business reading, long enough to reach past any offset here."""
    secret = "SECRET-" + os.urandom(8).hex()
    path = tmp_path / "outside" / "shadow"
    path.parent.mkdir()
    path.write_text("".join(f"{secret} {n}\n" for n in range(2000)))
    return path, secret


def test_a_spool_swapped_for_a_link_is_never_read_and_the_runs_lines_still_go(
    platform: FakePlatform, tmp_path: Path
) -> None:
    run_dir = tmp_path / "attempt-1"
    run_dir.mkdir()
    outside, secret = secret_file(tmp_path)
    supervisor = EventWriter(str(run_dir / EVENTS_FILE))
    supervisor.log("stdout", "before")
    fw = forwarder(platform, run_dir)
    # The run's user moves its spool aside and leaves a link in its place.
    (run_dir / EVENTS_FILE).rename(run_dir / "aside.jsonl")
    (run_dir / EVENTS_FILE).symlink_to(outside)
    supervisor.log("stdout", "after")
    supervisor.close()

    assert fw.drain() is True
    fw.close()

    assert platform.stored_lines(RUN) == ["before", "after"]
    assert secret not in str(platform.stored_events(RUN))


def test_links_at_the_offset_files_names_are_replaced_not_written_through(
    platform: FakePlatform, tmp_path: Path
) -> None:
    run_dir = tmp_path / "attempt-1"
    run_dir.mkdir()
    write_logs(run_dir, "one")
    fw = forwarder(platform, run_dir)
    victims = []
    for name in (OFFSET_FILE, OFFSET_FILE + ".tmp"):
        victim = tmp_path / f"victim-{name}"
        victim.write_text("untouched")
        (run_dir / name).symlink_to(victim)
        victims.append(victim)
    fw.pump()
    fw.close()

    assert [victim.read_text() for victim in victims] == ["untouched", "untouched"]
    assert not (run_dir / OFFSET_FILE).is_symlink()
    assert persisted_offset(run_dir) == file_size(run_dir)


def test_a_folder_swapped_for_a_link_keeps_the_forwarder_on_the_runs_own(
    platform: FakePlatform, tmp_path: Path
) -> None:
    run_dir = tmp_path / "attempt-1"
    run_dir.mkdir()
    write_logs(run_dir, "own")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write_logs(elsewhere, "planted")
    fw = forwarder(platform, run_dir)
    run_dir.rename(tmp_path / "moved")
    run_dir.symlink_to(elsewhere)

    assert fw.drain() is True
    fw.close()

    assert platform.stored_lines(RUN) == ["own"]
    assert not (elsewhere / OFFSET_FILE).exists()
    assert persisted_offset(tmp_path / "moved") == file_size(tmp_path / "moved")


def test_a_left_attempt_with_a_link_for_a_spool_or_a_folder_sends_nothing_of_it(
    platform: FakePlatform, tmp_path: Path
) -> None:
    outside, secret = secret_file(tmp_path)
    linked_spool = tmp_path / "runs" / str(RUN) / "attempt-1"
    linked_spool.mkdir(parents=True)
    (linked_spool / EVENTS_FILE).symlink_to(outside)
    linked_folder = tmp_path / "runs" / "8" / "attempt-1"
    linked_folder.parent.mkdir(parents=True)
    linked_folder.symlink_to(outside.parent)
    (outside.parent / EVENTS_FILE).symlink_to(outside)
    fine = left_attempt(tmp_path, 9, 1, "fine")

    forward_left(platform, [str(linked_spool), str(linked_folder), str(fine)])

    assert platform.stored_events(RUN) == platform.stored_events(8) == []
    assert platform.stored_lines(9) == ["fine"]
    assert secret not in str(platform.stored)
