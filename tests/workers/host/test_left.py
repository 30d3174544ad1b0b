"""Attempts an earlier worker process left after their supervisor had ended: finished now."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.waiting import alive, wait_until
from tests.workers.host.fakes import FakePlatform
from workers.contract.events import EVENTS_FILE
from workers.events import EventWriter
from workers.host.agent import SPEC_FILE, SUPERVISOR_PID, HostAgent, reap_orphans
from workers.host.artifacts import DONE_MARK, upload_key
from workers.host.forwarder import Forwarder
from workers.host.left import ended_attempt, finish_left
from workers.track import checkpoint

RUN, ATTEMPT = 7, 2


def left_attempt(work_dir: Path, run_id: int = RUN) -> tuple[Path, EventWriter]:
    """An attempt's folder as its supervisor leaves it: spec, spool, an artifact."""
    run_dir = work_dir / "runs" / str(run_id) / f"attempt-{ATTEMPT}"
    run_dir.mkdir(parents=True)
    spec = {"kind": "training", "device_type": "cpu", "entry": "job.py", "timeout_s": 60}
    (run_dir / SPEC_FILE).write_text(json.dumps(spec))
    events = EventWriter(str(run_dir / EVENTS_FILE))
    events.log("runner", "npulab runner: training run on cpu")
    events.log("stdout", "step 1")
    (run_dir / "trace.json").write_text('{"traceEvents": []}')
    events.artifact("trace.json", str(run_dir / "trace.json"), kind="trace")
    return run_dir, events


def checkpoint_at(work_dir: Path, step: int) -> None:
    """A complete checkpoint in the run's folder, as workers.track writes one."""
    directory = work_dir / "runs" / str(RUN) / "checkpoints" / checkpoint.step_dir_name(step)
    directory.mkdir(parents=True)
    data = b"weights of step %d" % step
    (directory / checkpoint.STATE_FILE).write_bytes(data)
    files = {
        checkpoint.STATE_FILE: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    }
    manifest = {"format": checkpoint.FORMAT, "step": step, "files": files}
    (directory / checkpoint.MANIFEST_FILE).write_text(json.dumps(manifest))


def uploads(platform: FakePlatform) -> list[dict[str, Any]]:
    return [upload["declaration"] for upload in platform.artifacts.values()]


def test_an_attempt_that_ended_unreported_is_finished_its_uploads_done_and_listed_till_then(
    agent: HostAgent, platform: FakePlatform, work_dir: Path
) -> None:
    run_dir, events = left_attempt(work_dir)
    checkpoint_at(work_dir, 5)
    # The earlier process had sent the start of the spool, then died.
    earlier = Forwarder(platform, RUN, ATTEMPT, str(run_dir))
    earlier.pump()
    earlier.close()
    events.log("stdout", "step 2")
    events.result("succeeded", "trained")
    events.close()
    platform.go_down("finish")

    thread = finish_left(agent, [str(run_dir)])

    assert thread is not None
    # Listed as running (in the heartbeats) while it is not yet reported.
    wait_until(lambda: platform.failed["finish"] >= 1, "a try to report the end")
    assert agent.running_ids() == [RUN]
    platform.come_back()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert agent.running_ids() == []
    [(run_id, attempt, report)] = platform.finished
    assert (run_id, attempt, report["exit_code"]) == (RUN, ATTEMPT, 0)
    assert report["exited_at"] > 0
    assert platform.stored_lines(RUN)[-1] == "step 2"
    assert platform.stored_events(RUN)[-1]["type"] == "result"
    assert sorted((d["kind"], d["name"], d.get("step")) for d in uploads(platform)) == [
        ("checkpoint", checkpoint.STATE_FILE, 5),
        ("trace", "trace.json", None),
    ]


def test_a_failed_result_is_reported_with_the_failed_exit_code_and_stored_artifacts_not_resent(
    agent: HostAgent, platform: FakePlatform, work_dir: Path
) -> None:
    run_dir, events = left_attempt(work_dir)
    events.result("failed", "loss is NaN", cause="process_exit")
    events.close()
    # The earlier process had stored the artifact.
    trace = (run_dir / "trace.json").read_bytes()
    stored = {"name": "trace.json", "sha256": hashlib.sha256(trace).hexdigest()}
    (run_dir / DONE_MARK.format(key=upload_key(stored))).touch()
    # The worker's own notes may follow the result (artifacts it could not store).
    notes = EventWriter(str(run_dir / EVENTS_FILE))
    notes.log("runner", "artifact 'x' not stored")
    notes.close()

    thread = finish_left(agent, [str(run_dir)])
    assert thread is not None
    thread.join(timeout=60)

    [(_, _, report)] = platform.finished
    assert report["exit_code"] == 1
    assert uploads(platform) == []


def test_attempts_whose_supervisor_did_not_end_by_itself_are_left_to_be_lost(
    agent: HostAgent, platform: FakePlatform, work_dir: Path
) -> None:
    no_result, events = left_attempt(work_dir, RUN)
    events.close()
    # A result, then more of the run's own lines: it was not the supervisor's last word.
    written_on, events = left_attempt(work_dir, 8)
    events.result("succeeded", "a script's own line, not the supervisor's")
    events.log("stdout", "still running")
    events.close()
    not_an_attempt = work_dir / "runs" / "9" / "notes"
    not_an_attempt.mkdir(parents=True)

    dirs = [str(no_result), str(written_on), str(not_an_attempt)]
    assert [ended_attempt(path) for path in dirs] == [None, None, None]
    assert finish_left(agent, dirs) is None
    assert agent.running_ids() == []
    assert platform.finished == []


def test_a_shutdown_while_finishing_leaves_the_rest_for_the_next_start(
    agent: HostAgent, platform: FakePlatform, work_dir: Path
) -> None:
    run_dir, events = left_attempt(work_dir)
    events.result("succeeded", "trained")
    events.close()
    platform.go_down()
    thread = finish_left(agent, [str(run_dir)])
    assert thread is not None
    wait_until(lambda: platform.failed["send_events"] >= 1, "a try to send the events")
    agent.shutdown()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert platform.finished == []
    assert agent.running_ids() == []
    # Still to be found by the next worker process.
    assert ended_attempt(str(run_dir)) is not None
    # The artifact's upload, started from the spool, stops too: it retried for the
    # process's life, its next start uploading the same file again beside it.
    wait_until(lambda: not threads_of(RUN), "the run's uploads to stop", timeout=60)


def threads_of(run_id: int) -> list[threading.Thread]:
    """The threads uploading the run's artifacts and checkpoints."""
    names = (f"artifacts-{run_id}", f"upload-{run_id}")
    return [thread for thread in threading.enumerate() if thread.name in names]


def a_supervisor_of(run_dir: Path) -> subprocess.Popen:
    """A process whose command line is a supervisor's of ``run_dir`` (it only sleeps)."""
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    process = subprocess.Popen(
        [*sleeper, "-m", "workers.run", "spec.json", "--run-dir", str(run_dir)],
        start_new_session=True,
    )
    # Until its exec, /proc shows the test's own command line: on a loaded machine the
    # worker would read that and rightly take it for no supervisor.
    cmdline = Path(f"/proc/{process.pid}/cmdline")
    wait_until(lambda: b"workers.run" in cmdline.read_bytes(), "the supervisor's exec", 60)
    return process


def test_a_start_kills_only_supervisors_of_its_own_folders(work_dir: Path, tmp_path: Path) -> None:
    own, events = left_attempt(work_dir, RUN)
    events.close()
    named, events = left_attempt(work_dir, 8)
    events.close()
    mine = a_supervisor_of(own)
    # A run may write its supervisor.pid: it names another worker's run here.
    elsewhere = a_supervisor_of(tmp_path / "other-worker" / "runs" / "3" / "attempt-1")
    # And a run here made its attempt's folder a link to that other worker's attempt.
    other = tmp_path / "other-worker" / "runs" / "3" / "attempt-1"
    other.mkdir(parents=True)
    (other / SUPERVISOR_PID).write_text(str(elsewhere.pid))
    (work_dir / "runs" / "9").mkdir()
    (work_dir / "runs" / "9" / "attempt-1").symlink_to(other)
    try:
        (own / SUPERVISOR_PID).write_text(str(mine.pid))
        (named / SUPERVISOR_PID).write_text(str(elsewhere.pid))

        left = sorted(reap_orphans(str(work_dir)))

        assert left == [(str(own), True), (str(named), False)]
        assert mine.wait(timeout=30) == -signal.SIGKILL
        assert alive(elsewhere.pid)
        assert not (own / SUPERVISOR_PID).exists()
        assert (other / SUPERVISOR_PID).read_text() == str(elsewhere.pid)
    finally:
        for process in (mine, elsewhere):
            process.kill()
            process.wait()
