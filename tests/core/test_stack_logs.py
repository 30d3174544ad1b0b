"""`make run`'s console: each process's output in var/log/, on screen only what a user needs."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

from npulab.web import stack

# Lines as the stack's processes write them (captured from `make run`).
CONTROL = """\
/work/main/.venv/lib/python3.11/site-packages/celery/platforms.py:893: SecurityWarning: You're running the worker with superuser privileges: this is
absolutely not recommended!
 -------------- control@vm v5.7.0 (collider)
--- ***** -----
- ** ---------- .> transport:   redis+socket:///work/main/var/redis/redis.sock
[tasks]
  . runs.place_runs
[2026-12-01 14:08:28,433: INFO/MainProcess] Connected to redis+socket:///work/main/var/redis/redis.sock
[2026-12-01 14:08:29,001: INFO/Beat] Scheduler: Sending due task sweep-runs (runs.sweep_runs)
[2026-12-01 14:08:29,010: INFO/MainProcess] Task runs.sweep_runs[0f1c] received
[2026-12-01 14:08:29,020: INFO/MainProcess] Task runs.sweep_runs[0f1c] succeeded in 0.01s: None
[2026-12-01 14:08:30,020: ERROR/MainProcess] Task runs.place_runs[77aa] raised unexpected: OperationalError('gone')
Traceback (most recent call last):
  File "/work/main/platform/npulab/runs/scheduler.py", line 131, in place_queued_runs
psycopg.OperationalError: gone
[2026-12-01 14:08:31,001: INFO/Beat] Scheduler: Sending due task sweep-hosts (hosts.sweep_hosts)
"""  # noqa: E501
WORKER = """\
2026-12-01 14:08:28,030 INFO workers.host.agent: registered as host 'local': 1 cpu device(s), queue host.local
2026-12-01 14:09:06,972 INFO workers.host.agent: run 1 attempt 1: starting in /work/main/var/worker/runs/1/attempt-1
2026-12-01 14:09:07,500 INFO workers.host.forwarder: run 1: resuming events from offset 0
2026-12-01 14:09:09,928 INFO workers.host.agent: run 1 attempt 1: finished ({'exit_code': 0})
2026-12-01 14:09:10,100 WARNING workers.host.agent: heartbeat failed: connection refused
"""  # noqa: E501
WEB = """\
[2026-12-01 14:08:25 +0000] [24390] [INFO] Starting gunicorn 27.0.1
[2026-12-01 14:08:25 +0000] [24392] [INFO] Booting worker with pid: 24392
2026-12-01 14:09:06,826 WARNING django.request: Not Found: /nope
2026-12-01 14:09:07,000 ERROR django.request: Internal Server Error: /runs/1/
Traceback (most recent call last):
ZeroDivisionError: division by zero
[2026-12-01 14:09:34 +0000] [24393] [INFO] Worker exiting (pid: 24393)
"""


def shown(text: str) -> list[str]:
    keep = stack.ConsoleFilter()
    return [line for line in text.splitlines() if keep(line)]


def test_celery_banner_beat_and_task_lines_stay_off_the_console() -> None:
    assert shown(CONTROL) == [
        "[2026-12-01 14:08:30,020: ERROR/MainProcess] Task runs.place_runs[77aa] raised "
        "unexpected: OperationalError('gone')",
        "Traceback (most recent call last):",
        '  File "/work/main/platform/npulab/runs/scheduler.py", line 131, in place_queued_runs',
        "psycopg.OperationalError: gone",
    ]


def test_runs_starting_and_ending_and_warnings_are_shown() -> None:
    assert [line.split(": ", 1)[1] for line in shown(WORKER)] == [
        "registered as host 'local': 1 cpu device(s), queue host.local",
        "run 1 attempt 1: starting in /work/main/var/worker/runs/1/attempt-1",
        "run 1 attempt 1: finished ({'exit_code': 0})",
        "heartbeat failed: connection refused",
    ]


def test_a_server_error_is_shown_with_its_traceback_and_a_404_is_not() -> None:
    assert shown(WEB) == [
        "2026-12-01 14:09:07,000 ERROR django.request: Internal Server Error: /runs/1/",
        "Traceback (most recent call last):",
        "ZeroDivisionError: division by zero",
    ]


def test_an_uncaught_traceback_is_shown_outside_any_record() -> None:
    lines = ["Traceback (most recent call last):", '  File "x.py"', "ImportError: no celery"]
    assert shown("\n".join(["usage: celery [OPTIONS]", *lines])) == lines


def test_the_router_writes_every_line_to_the_processs_file(tmp_path: Path) -> None:
    console: list[str] = []
    router = stack.LogRouter(tmp_path / "log", console.append)
    for line in CONTROL.splitlines():
        router("control", line)
    for line in WORKER.splitlines():
        router("worker", line)
    router.close()
    router("worker", "a line after close is dropped, not an error")

    assert (tmp_path / "log" / "control.log").read_text() == CONTROL
    assert (tmp_path / "log" / "worker.log").read_text() == WORKER
    assert len(console) == 4 + 4
    assert console[0].startswith("control | [2026-12-01 14:08:30,020: ERROR/MainProcess]")
    assert console[5] == (
        " worker | 2026-12-01 14:09:06,972 INFO workers.host.agent: run 1 attempt 1: "
        "starting in /work/main/var/worker/runs/1/attempt-1"
    )


def test_the_previous_starts_log_is_kept(tmp_path: Path) -> None:
    first = stack.LogRouter(tmp_path, lambda line: None)
    first("web", "first start")
    first.close()
    second = stack.LogRouter(tmp_path, lambda line: None)
    second("web", "second start")
    second.close()
    assert (tmp_path / "web.log").read_text() == "second start\n"
    assert (tmp_path / "web.log.1").read_text() == "first start\n"


def test_a_real_processs_output_is_routed(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        print(" -------------- celery@host v5 (banner)")
        print("2026-12-01 14:00:00,000 INFO workers.host.agent: run 7 attempt 1: starting in /x")
        print("2026-12-01 14:00:01,000 ERROR workers.host.agent: end refused: 409")
        print("2026-12-01 14:00:02,000 INFO workers.host.agent: sent a heartbeat")
        print("done")
        """
    )
    console: list[str] = []
    router = stack.LogRouter(tmp_path, console.append)
    process = stack.ManagedProcess(
        "worker", [sys.executable, "-c", script], stack.child_env(), router
    )
    process.start()
    log = tmp_path / "worker.log"
    deadline = time.monotonic() + 60
    while not (log.exists() and log.read_text().endswith("done\n")):
        assert time.monotonic() < deadline, log.read_text() if log.exists() else "no log"
        time.sleep(0.05)
    router.close()

    assert len(log.read_text().splitlines()) == 5
    assert [line.rsplit(": ", 1)[1] for line in console] == ["starting in /x", "409"]


def test_the_web_server_writes_its_access_log_to_a_file(tmp_path: Path) -> None:
    argv = stack.web_argv("127.0.0.1", 8000, access_log=tmp_path / "web-access.log")
    assert argv[argv.index("--access-logfile") + 1] == str(tmp_path / "web-access.log")
    # The end-to-end platform keeps it in the web process's own output.
    plain = stack.web_argv("127.0.0.1", 8000)
    assert plain[plain.index("--access-logfile") + 1] == "-"
