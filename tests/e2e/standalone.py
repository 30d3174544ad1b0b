"""`manage.py standalone` (what `make run` starts) as a process the tests drive."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import requests

from harness.polling import pauses
from harness.stack import free_port, prepare_run_user
from npulab.web import stack
from tests.paths import REPO_DIR

ADMIN_PASSWORD = "standalone-admin-pw"
ENDED = ("succeeded", "failed", "cancelled", "lost", "expired")
SMOKE = {"kind": "smoke", "device_type": "cpu", "matmul_size": 128, "train_steps": 5}


class Standalone:
    """The whole stack on SQLite and an embedded Redis in ``var_dir``, on a free port."""

    def __init__(self, var_dir: Path, hosts: int = 1) -> None:
        self.var_dir = var_dir
        self.hosts = hosts
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = stack.child_env(
            {
                "DJANGO_SETTINGS_MODULE": "npulab.settings",
                "NPULAB_VAR_DIR": str(var_dir),
                "DATABASE_URL": f"sqlite:///{var_dir / 'npulab.sqlite3'}",
                "NPULAB_ADMIN_PASSWORD": ADMIN_PASSWORD,
            }
        )
        self.env.pop("NPULAB_BROKER_URL", None)  # nothing configured: the embedded Redis starts
        self.output: list[str] = []
        self.process: subprocess.Popen | None = None
        self.api = requests.Session()

    def start(self, timeout: float = 120) -> None:
        # As `make run` does as root: var/ and the work directories private, then the run
        # users let through them (the stack closes var/ to others when it starts).
        works = [
            self.var_dir / "worker",
            *(self.var_dir / f"worker-{n}" for n in range(2, self.hosts + 1)),
        ]
        for work in works:
            (work / "runs").mkdir(parents=True, exist_ok=True, mode=0o700)
            for folder in (self.var_dir, work):
                folder.chmod(folder.stat().st_mode & ~0o007)
            prepare_run_user(work / "runs", [sys.executable])
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(REPO_DIR / "manage.py"),
                "standalone",
                "--port",
                str(self.port),
                "--hosts",
                str(self.hosts),
            ],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        stdout = self.process.stdout
        threading.Thread(target=lambda: self.output.extend(stdout), daemon=True).start()
        self.wait_for(lambda: "npulab is running" in self.text, timeout, "the banner")
        token = subprocess.run(
            [sys.executable, str(REPO_DIR / "manage.py"), "api_token", "admin"],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        self.api.headers["Authorization"] = f"Token {token}"

    @property
    def text(self) -> str:
        return "".join(self.output)

    def wait_for(self, condition: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        pause = pauses()
        while not condition():
            assert self.process is not None
            assert self.process.poll() is None, (
                f"standalone exited waiting for {what}:\n{self.text}"
            )
            assert time.monotonic() < deadline, (
                f"no {what} within {timeout} s:\n{self.text[-4000:]}"
            )
            time.sleep(next(pause))

    def smoke_run(self, timeout: float = 240) -> dict[str, Any]:
        """Submit a small smoke run and wait for it to end; its last state."""
        return self.submit_and_wait(SMOKE, timeout)

    def submit_and_wait(self, spec: dict[str, Any], timeout: float = 240) -> dict[str, Any]:
        """Submit ``spec`` (while the web server starts again, until it answers) and wait for
        the run to end; its last state."""
        deadline = time.monotonic() + timeout
        pause = pauses()
        while True:
            try:
                run = self.api.post(f"{self.url}/api/v1/runs/", json=spec, timeout=30).json()
                break
            except requests.ConnectionError:  # the web server is starting again
                assert time.monotonic() < deadline, self.text[-4000:]
                time.sleep(next(pause))
        pause = pauses()
        while run.get("status") not in ENDED:
            assert time.monotonic() < deadline, f"run {run}:\n{self.text[-4000:]}"
            time.sleep(next(pause))
            try:
                run = self.api.get(f"{self.url}/api/v1/runs/{run['id']}/", timeout=30).json()
            except requests.ConnectionError:
                continue
        return run

    def children(self) -> dict[str, int]:
        """The stack's child processes by name (as in var/log), from /proc."""
        assert self.process is not None
        marks = {
            # Redis rewrites its command line; its program name stays.
            "redis": "redis-server",
            "web": str(self.var_dir / "log" / "web-access.log"),
            "control": str(self.var_dir / "celerybeat-schedule"),
            "worker": str(self.var_dir / "worker"),
        }
        found: dict[str, int] = {}
        for pid, argv, parent in _processes():
            if parent != self.process.pid:
                continue
            for name, mark in marks.items():
                if mark in argv:
                    found[name] = pid
        return found

    def processes_left(self) -> list[str]:
        """Command lines of any process still running with this stack's var dir in them."""
        return [argv for pid, argv, _ in _processes() if str(self.var_dir) in argv]

    def describe_left(self) -> list[str]:
        """What each process still left is doing, for a failure's message: its command
        line, state, and the kernel function each of its threads waits in (its stdout went
        to the stack, which is gone)."""
        described = []
        for pid, argv, _ in _processes():
            if str(self.var_dir) not in argv:
                continue
            described.append(f"{pid} {_state(pid)} {argv}")
            for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
                described.append(f"  thread {task.name} {_state(int(task.name), task)}")
        return described

    def stop(self) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=90)


def _state(pid: int, folder: Path | None = None) -> str:
    """``/proc``'s state letter, name and wait channel of a process or thread."""
    folder = folder or Path(f"/proc/{pid}")
    try:
        stat = (folder / "stat").read_text().rsplit(")", 1)[1].split()[0]
        name = (folder / "comm").read_text().strip()
        wchan = (folder / "wchan").read_text().strip() or "-"
    except (OSError, IndexError):
        return "gone"
    return f"{stat} {name} wchan={wchan}"


def _processes() -> list[tuple[int, str, int]]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if argv:
            found.append((int(entry), argv, parent))
    return found
