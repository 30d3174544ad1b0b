"""A real platform for end-to-end tests: gunicorn, the Celery control worker with beat,
and a CPU host worker, on their own database and broker, driven over HTTP like a user."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import requests
from django.conf import settings

from npulab.core import stack
from tests.paths import REPO_DIR
from tests.services import in_ci

TERMINAL = {"succeeded", "failed", "cancelled", "lost"}
HOST = "e2e-cpu"
USER, PASSWORD = "e2e", "e2e-password-not-secret"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Platform:
    """One running stack and a token client for its API."""

    def __init__(self, var_dir: Path, env: dict[str, str], port: int) -> None:
        self.var_dir = var_dir
        self.env = env
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.logs = var_dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self._log_lock = threading.Lock()
        self.processes: dict[str, stack.ManagedProcess] = {}
        self.session = requests.Session()

    def echo(self, name: str, line: str) -> None:
        with self._log_lock, open(self.logs / f"{name}.log", "a") as handle:
            handle.write(line + "\n")

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, str(REPO_DIR / "manage.py"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def start(self, name: str, argv: list[str]) -> stack.ManagedProcess:
        process = stack.ManagedProcess(name, argv, self.env, self.echo)
        process.start()
        self.processes[name] = process
        return process

    def start_web(self) -> None:
        web = self.start("web", stack.web_argv("127.0.0.1", self.port, workers=1))
        stack.wait_for_http(f"{self.url}/healthz", timeout=60, process=web)

    def stop_web(self) -> None:
        self.processes["web"].stop()

    # -- the API, as a user ---------------------------------------------------

    def api(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self.session.request(method, f"{self.url}/api/v1/{path}", timeout=30, **kwargs)

    def submit(self, **spec: Any) -> dict[str, Any]:
        response = self.api("POST", "runs/", json={"kind": "smoke", "device_type": "cpu", **spec})
        assert response.status_code == 201, response.text
        return response.json()

    def run(self, run_id: int) -> dict[str, Any]:
        response = self.api("GET", f"runs/{run_id}/")
        assert response.status_code == 200, response.text
        return response.json()

    def wait(self, run_id: int, statuses: set[str] = TERMINAL, timeout: float = 180) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            run = self.run(run_id)
            if run["status"] in statuses:
                return run
            if time.monotonic() > deadline:
                raise AssertionError(f"run {run_id} still {run['status']}: {run}\n{self.tail()}")
            time.sleep(0.2)

    def run_dir(self, run_id: int, attempt: int = 1) -> Path:
        return self.var_dir / "worker" / "runs" / str(run_id) / f"attempt-{attempt}"

    def tail(self, lines: int = 30) -> str:
        parts = []
        for log in sorted(self.logs.glob("*.log")):
            parts.append(f"--- {log.name}\n" + "\n".join(log.read_text().splitlines()[-lines:]))
        return "\n".join(parts)


def _database_url(var_dir: Path) -> tuple[str, callable]:
    """A database of the e2e stack's own: PostgreSQL when the tests use it, else a file."""
    services = settings.SERVICES
    if not services.database_url:
        return f"sqlite:///{var_dir / 'e2e.sqlite3'}", lambda: None
    import psycopg

    name = f"npulab_e2e_{os.getpid()}"
    admin = services.database_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
        connection.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return services.database_url.rsplit("/", 1)[0] + f"/{name}", drop


@pytest.fixture(scope="session")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    var_dir = tmp_path_factory.mktemp("e2e")
    database_url, drop_database = _database_url(var_dir)
    embedded = None
    broker_url = settings.SERVICES.redis_url
    if broker_url:
        redis.Redis.from_url(broker_url).flushdb()  # only db 15: queues left by earlier runs
    else:
        embedded = stack.EmbeddedRedis(var_dir / "redis", lambda name, line: None)
        embedded.start()
        broker_url = embedded.url
    env = stack.child_env(
        {
            "DJANGO_SETTINGS_MODULE": "npulab.settings",
            "DATABASE_URL": database_url,
            "NPULAB_BROKER_URL": broker_url,
            "NPULAB_VAR_DIR": str(var_dir),
            "NPULAB_SCHEDULER_TICK_S": "1",
            "NPULAB_HEARTBEAT_S": "1",
            "DJANGO_SUPERUSER_USERNAME": USER,
            "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
            "DJANGO_SUPERUSER_EMAIL": "e2e@example.invalid",
        }
    )
    platform = Platform(var_dir, env, free_port())
    try:
        platform.manage("migrate", "--noinput")
        platform.manage("createsuperuser", "--noinput")
        token = platform.manage("api_token", USER)
        platform.session.headers["Authorization"] = f"Token {token}"
        token_file = var_dir / "host.token"
        token_file.write_text(platform.manage("host_token", HOST))
        platform.start_web()
        platform.start("control", stack.control_argv(var_dir / "celerybeat-schedule"))
        platform.start(
            "worker",
            stack.host_worker_argv(platform.url, token_file, broker_url, var_dir / "worker"),
        )
        deadline = time.monotonic() + 60
        while platform.api("GET", f"hosts/{HOST}/").json().get("status") != "online":
            assert time.monotonic() < deadline, platform.tail()
            time.sleep(0.2)
        yield platform
    finally:
        for process in reversed(list(platform.processes.values())):
            process.stop()
        if embedded is not None:
            embedded.stop()
        drop_database()


def chromium_path() -> str | None:
    return os.environ.get("NPULAB_CHROMIUM") or shutil.which("chromium")


def require(condition: bool, reason: str) -> None:
    """Skip for a missing tool or service, except under CI=true, where it is a failure."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"CI=true: {reason}")
    pytest.skip(reason)
