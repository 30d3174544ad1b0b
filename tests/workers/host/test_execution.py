"""RunExecution: a real ``python -m workers.run`` on a fake platform.

Each run is a training run whose entry is a tiny script written by the test
(no torch, no device): the supervisor, its child, the launcher and the script
are real processes, the platform is ``FakePlatform``.
"""

from __future__ import annotations

import json
import os
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import alive, wait_until
from tests.workers.host.fakes import FakePlatform
from workers.contract.events import EVENTS_FILE
from workers.events import iter_events
from workers.host import agent as agent_module
from workers.host.agent import SUPERVISOR_PID, HostAgent
from workers.host.forwarder import OFFSET_FILE, Forwarder
from workers.processes import registered_groups

ATTEMPT = 1

# Prints, then exits with the code given as its first argument.
QUICK = """
import sys
for i in range(3):
    print(f"line {i}", flush=True)
sys.exit(int(sys.argv[1]))
"""

# Writes its pid to the file given as its first argument, says so, then blocks
# until it is killed; with "ignore-term" it ignores SIGTERM as a hung job might.
BLOCKING = """
import os, signal, sys, threading
if "ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(sys.argv[1], "w") as handle:
    handle.write(str(os.getpid()))
print("started", flush=True)
threading.Event().wait()
"""


def training_claim(tmp_path: Path, source: str, *args: str, **spec: Any) -> dict[str, Any]:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(source))
    doc = {
        "kind": "training",
        "device_type": "cpu",
        "entry": str(script),
        "args": list(args),
        "timeout_s": 120,
        **spec,
    }
    return {"spec": doc, "devices": [0], "resume": None}


def run_dir(work_dir: Path, run_id: int) -> Path:
    return work_dir / "runs" / str(run_id) / f"attempt-{ATTEMPT}"


def file_events(work_dir: Path, run_id: int) -> list[dict[str, Any]]:
    return list(iter_events(str(run_dir(work_dir, run_id) / EVENTS_FILE)))


def execute_in_thread(agent: HostAgent, run_id: int) -> threading.Thread:
    thread = threading.Thread(target=agent.execute, args=(run_id, ATTEMPT), daemon=True)
    thread.start()
    return thread


def join(thread: threading.Thread, what: str) -> None:
    thread.join(timeout=30)
    assert not thread.is_alive(), f"{what} did not end within 30 s"


def script_pid(tmp_path: Path) -> int:
    pid_file = tmp_path / "job.pid"
    wait_until(lambda: pid_file.exists() and pid_file.read_text(), "the script's pid")
    return int(pid_file.read_text())


def assert_forwarded_exactly_once(platform: FakePlatform, work_dir: Path, run_id: int) -> None:
    events = file_events(work_dir, run_id)
    assert platform.stored_events(run_id) == events
    size = os.path.getsize(run_dir(work_dir, run_id) / EVENTS_FILE)
    assert platform.offsets[run_id] == size
    assert int((run_dir(work_dir, run_id) / OFFSET_FILE).read_text()) == size


def test_a_run_forwards_every_event_once_in_order_and_reports_its_exit_code(
    agent: HostAgent, platform: FakePlatform, work_dir: Path, tmp_path: Path
) -> None:
    platform.claims[1] = training_claim(tmp_path, QUICK, "0")
    agent.execute(1, ATTEMPT)

    assert_forwarded_exactly_once(platform, work_dir, 1)
    events = platform.stored_events(1)
    stdout = [event["line"] for event in events if event.get("stream") == "stdout"]
    assert stdout[-3:] == ["line 0", "line 1", "line 2"]
    assert events[-1]["type"] == "result"
    assert events[-1]["status"] == "succeeded"
    [(run_id, attempt, report)] = platform.finished
    assert (run_id, attempt, report["exit_code"]) == (1, ATTEMPT, 0)
    assert "stop_reason" not in report
    assert "error" not in report
    # The run's snapshot went up with its id and the run's log says so.
    assert ("upload_snapshot", (1,)) in platform.calls
    assert any("environment snapshot" in event.get("line", "") for event in events)
    # Finished and reported: nothing for the next start of the worker to reap.
    assert not (run_dir(work_dir, 1) / SUPERVISOR_PID).exists()
    assert agent.running_ids() == []


def test_batches_hold_no_more_events_than_the_claim_reply_says(
    agent: HostAgent, platform: FakePlatform, work_dir: Path, tmp_path: Path
) -> None:
    platform.claims[1] = {**training_claim(tmp_path, QUICK, "0"), "max_events": 2}
    agent.execute(1, ATTEMPT)

    assert_forwarded_exactly_once(platform, work_dir, 1)
    sizes = [count for _, _, count in platform.batches(1)]
    assert sum(sizes) == len(file_events(work_dir, 1)) > 4
    assert max(sizes) == 2


def test_a_failed_run_reports_the_supervisors_exit_code_after_its_events(
    agent: HostAgent, platform: FakePlatform, tmp_path: Path
) -> None:
    platform.claims[2] = training_claim(tmp_path, QUICK, "3")
    agent.execute(2, ATTEMPT)

    result = platform.stored_events(2)[-1]
    assert (result["type"], result["status"]) == ("result", "failed")
    assert "exited with code 3" in result["reason"]
    assert [report["exit_code"] for _, _, report in platform.finished] == [1]
    # finish comes only once every event is stored.
    names = [name for name, _ in platform.calls]
    assert names.index("finish") > max(i for i, name in enumerate(names) if name == "send_events")


def test_a_spec_the_runner_refuses_is_finished_with_exit_code_2_and_its_stderr(
    agent: HostAgent, platform: FakePlatform, tmp_path: Path
) -> None:
    platform.claims[3] = training_claim(tmp_path, QUICK, "0", entry="not-a-script.txt")
    agent.execute(3, ATTEMPT)

    [(_, _, report)] = platform.finished
    assert report["exit_code"] == 2
    assert "invalid spec" in report["error"]
    assert platform.stored_events(3)[-1]["cause"] == "spec_invalid"


def test_an_interpreter_that_cannot_start_is_finished_with_the_error(
    agent: HostAgent, platform: FakePlatform, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-such-python")
    platform.claims[4] = training_claim(tmp_path, QUICK, "0", python=missing)
    agent.execute(4, ATTEMPT)

    [(_, _, report)] = platform.finished
    assert report["exit_code"] is None
    assert report["error"].startswith(f"cannot start {missing}")


def test_while_the_platform_is_down_events_stay_spooled_and_arrive_when_it_is_back(
    agent: HostAgent, platform: FakePlatform, work_dir: Path, tmp_path: Path
) -> None:
    platform.claims[5] = training_claim(tmp_path, QUICK, "0")
    platform.go_down("send_events")
    platform.fail_next("finish", 2)
    thread = execute_in_thread(agent, 5)

    wait_until(
        lambda: any(event["type"] == "result" for event in file_events(work_dir, 5)),
        "the run to end while the platform is down",
    )
    wait_until(lambda: platform.failed["send_events"] >= 3, "the forwarder to keep trying")
    assert platform.stored_events(5) == []
    assert platform.finished == []
    assert thread.is_alive()  # the end is not reported before the events are stored

    platform.come_back()
    join(thread, "the execution")
    assert_forwarded_exactly_once(platform, work_dir, 5)
    assert platform.failed["finish"] == 2
    assert [report["exit_code"] for _, _, report in platform.finished] == [0]


def test_a_cancel_in_the_events_reply_stops_the_run_and_its_processes(
    agent: HostAgent, platform: FakePlatform, work_dir: Path, tmp_path: Path
) -> None:
    platform.claims[6] = training_claim(tmp_path, BLOCKING, str(tmp_path / "job.pid"))
    thread = execute_in_thread(agent, 6)
    pid = script_pid(tmp_path)
    wait_until(lambda: "started" in platform.stored_lines(6), "the script's output")
    assert agent.running_ids() == [6]

    platform.cancel.add(6)
    join(thread, "the cancelled execution")

    assert not alive(pid)
    [(_, _, report)] = platform.finished
    assert report["stop_reason"] == "cancel requested"
    assert report["exit_code"] == 1
    result = platform.stored_events(6)[-1]
    assert (result["type"], result["cause"]) == ("result", "terminated")
    assert_forwarded_exactly_once(platform, work_dir, 6)


def test_a_run_that_ignores_the_stop_is_killed_with_its_process_groups(
    agent: HostAgent,
    platform: FakePlatform,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The script ignores SIGTERM, so the runner is still waiting for it when
    # the (here zero) grace is over and the host agent kills everything.
    monkeypatch.setattr(agent_module, "CANCEL_GRACE_S", 0.0)
    job_pid = str(tmp_path / "job.pid")
    platform.claims[7] = training_claim(tmp_path, BLOCKING, job_pid, "ignore-term")
    thread = execute_in_thread(agent, 7)
    pid = script_pid(tmp_path)

    agent.cancel(7)
    join(thread, "the killed execution")

    wait_until(lambda: not alive(pid), "the script to be killed", timeout=10)
    [(_, _, report)] = platform.finished
    assert report["exit_code"] == -9
    assert report["stop_reason"] == "cancel requested"


def test_shutdown_stops_a_running_run_and_reports_why(
    agent: HostAgent, platform: FakePlatform, work_dir: Path, tmp_path: Path
) -> None:
    platform.claims[8] = training_claim(tmp_path, BLOCKING, str(tmp_path / "job.pid"))
    thread = execute_in_thread(agent, 8)
    pid = script_pid(tmp_path)

    agent.shutdown()
    join(thread, "the execution after shutdown")

    assert not alive(pid)
    [(_, _, report)] = platform.finished
    assert report["stop_reason"] == "the host worker is shutting down"
    assert_forwarded_exactly_once(platform, work_dir, 8)


def test_shutdown_while_the_platform_is_down_leaves_the_spool_on_disk(
    agent: HostAgent, platform: FakePlatform, work_dir: Path, tmp_path: Path
) -> None:
    platform.claims[9] = training_claim(tmp_path, BLOCKING, str(tmp_path / "job.pid"))
    thread = execute_in_thread(agent, 9)
    pid = script_pid(tmp_path)
    wait_until(lambda: "started" in platform.stored_lines(9), "the script's output")

    platform.go_down()
    agent.shutdown()
    join(thread, "the execution after shutdown")

    assert not alive(pid)
    assert platform.finished == []
    directory = run_dir(work_dir, 9)
    events = file_events(work_dir, 9)
    assert events[-1]["type"] == "result"  # written, but not delivered
    assert platform.stored_events(9) == events[: len(platform.stored_events(9))]
    assert int((directory / OFFSET_FILE).read_text()) < os.path.getsize(directory / EVENTS_FILE)
    assert (directory / SUPERVISOR_PID).exists()

    # Nothing is lost: forwarding from the persisted offset delivers the rest once.
    platform.come_back()
    Forwarder(platform, 9, ATTEMPT, str(directory)).drain()
    assert_forwarded_exactly_once(platform, work_dir, 9)


def test_shutdown_before_the_supervisor_started_still_stops_the_run(
    agent: HostAgent, platform: FakePlatform, work_dir: Path, tmp_path: Path
) -> None:
    # The shutdown comes while the run's snapshot is being sent, before there
    # is a process to signal: the run must not go on regardless.
    platform.claims[10] = training_claim(tmp_path, BLOCKING, str(tmp_path / "job.pid"))
    platform.on_snapshot = agent.shutdown
    thread = execute_in_thread(agent, 10)
    join(thread, "the execution after an early shutdown")

    # Whatever it had started (the training process group, if any) is gone.
    for pgid in registered_groups(str(run_dir(work_dir, 10))):
        assert not alive(pgid)
    [(_, _, report)] = platform.finished
    assert report["stop_reason"] == "the host worker is shutting down"


def test_the_run_environment_has_the_lease_and_not_the_worker_credentials(
    agent: HostAgent,
    platform: FakePlatform,
    work_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NPULAB_HOST_TOKEN", "secret-host-token")
    monkeypatch.setenv("NPULAB_BROKER_URL", "redis://secret")
    dump = """
    import json, os, sys
    keys = ("NPULAB_RUN_ID", "NPULAB_ATTEMPT", "NPULAB_CHECKPOINT_DIR", "NPULAB_HOST_TOKEN",
            "NPULAB_BROKER_URL")
    print(json.dumps({key: os.environ.get(key) for key in keys}), flush=True)
    """
    platform.claims[11] = training_claim(tmp_path, dump)
    agent.execute(11, ATTEMPT)

    line = next(line for line in platform.stored_lines(11) if line.startswith("{"))
    assert json.loads(line) == {
        "NPULAB_RUN_ID": "11",
        "NPULAB_ATTEMPT": str(ATTEMPT),
        "NPULAB_CHECKPOINT_DIR": str(work_dir / "runs" / "11" / "checkpoints"),
        "NPULAB_HOST_TOKEN": None,
        "NPULAB_BROKER_URL": None,
    }


# Writes a trace in the run directory and a file outside it, and announces both.
ANNOUNCES = """
import os, sys
from workers.events import EventWriter
run_dir = os.environ["NPULAB_RUN_DIR"]
events = EventWriter(os.path.join(run_dir, "events.jsonl"))
os.makedirs(os.path.join(run_dir, "profiles"), exist_ok=True)
inside = os.path.join(run_dir, "profiles", "trace-1.json.gz")
with open(inside, "wb") as handle:
    handle.write(b"a trace" * 100)
events.artifact("trace-1.json.gz", inside, kind="trace")
events.artifact("outside.json.gz", sys.argv[1], kind="trace")
events.close()
"""


def test_announced_artifacts_are_uploaded_and_what_is_not_is_said_in_the_runs_log(
    agent: HostAgent, platform: FakePlatform, tmp_path: Path
) -> None:
    outside = tmp_path / "secret.json.gz"
    outside.write_bytes(b"not the run's")
    platform.claims[7] = training_claim(tmp_path, ANNOUNCES, str(outside))
    agent.execute(7, ATTEMPT)

    [upload] = platform.artifacts.values()
    assert upload["declaration"]["name"] == "trace-1.json.gz"
    assert upload["declaration"]["kind"] == "trace"
    assert upload["data"] == b"a trace" * 100
    lines = platform.stored_lines(7)
    assert "artifact 'outside.json.gz' not uploaded: it is outside the run directory" in lines
    # The uploads come before the end is reported.
    names = [name for name, _ in platform.calls]
    assert names.index("finish") > names.index("upload_chunk")


def test_the_workers_notes_go_into_the_spool_it_reads_though_the_run_swapped_its_name(
    agent: HostAgent, platform: FakePlatform, tmp_path: Path
) -> None:
    outside = tmp_path / "secret.json.gz"
    outside.write_bytes(b"not the run's")
    # The run moves its spool aside and leaves an empty file of its own under the name.
    swaps = ANNOUNCES + (
        "spool = os.path.join(run_dir, 'events.jsonl')\n"
        "os.rename(spool, spool + '.moved')\n"
        "open(spool, 'w').close()\n"
    )
    platform.claims[9] = training_claim(tmp_path, swaps, str(outside))
    agent.execute(9, ATTEMPT)

    lines = platform.stored_lines(9)
    assert "artifact 'outside.json.gz' not uploaded: it is outside the run directory" in lines
    assert platform.stored_events(9)[-1]["type"] == "log"
    assert [report["exit_code"] for _, _, report in platform.finished] == [0]


def test_an_artifact_the_platform_refuses_is_a_line_in_the_runs_log(
    agent: HostAgent, platform: FakePlatform, tmp_path: Path
) -> None:
    detail = "the trace's 700 bytes exceed the limit of 100 bytes (NPULAB_PROFILE_MAX_BYTES)"
    platform.reject("create_upload", 413, {"detail": detail, "max_bytes": 100})
    outside = tmp_path / "other.json.gz"
    outside.write_bytes(b"x")
    platform.claims[8] = training_claim(tmp_path, ANNOUNCES, str(outside))
    agent.execute(8, ATTEMPT)

    lines = platform.stored_lines(8)
    assert f"artifact 'trace-1.json.gz' not stored: {detail}" in lines
    assert platform.stored_events(8)[-1]["type"] == "log"  # after the result: the host's note
    assert [report["exit_code"] for _, _, report in platform.finished] == [0]
