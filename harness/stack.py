"""A real npulab platform on this machine, for end-to-end tests and benchmarks.

Gunicorn, the Celery control worker with beat and a CPU host worker, on a
database and broker of their own, driven over HTTP like a user would.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from harness import commands as commands_
from harness import templates
from harness.polling import pauses
from harness.services import Services
from npulab.web import stack
from workers.contract import script_env
from workers.host import runuser
from workers.host.agent import SUPERVISOR_PID, kill_run_processes

REPO_DIR = Path(__file__).resolve().parent.parent

# Without these, Chromium keeps trying to reach Google's hosts, which a closed
# network refuses, and the refusals slow every page.
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    """Debian's chromium (or NPULAB_CHROMIUM): Playwright's own download fails here."""
    return os.environ.get("NPULAB_CHROMIUM") or shutil.which("chromium")


TERMINAL = {"succeeded", "failed", "cancelled", "lost", "expired"}
HOST = "e2e-cpu"
USER, PASSWORD = "e2e", "e2e-password-not-secret"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def create_postgres_database(server_url: str, name: str) -> tuple[str, Callable[[], None]]:
    """A fresh database ``name`` on the server of ``server_url``, and how to drop it."""
    import psycopg

    url = server_url.rsplit("/", 1)[0] + f"/{name}"
    drop_postgres_database(url)
    with psycopg.connect(_admin_url(url), autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return url, functools.partial(drop_postgres_database, url)


def drop_postgres_database(url: str) -> None:
    """Drop the database of ``url`` if it exists, ending its sessions."""
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(_admin_url(url), autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _admin_url(url: str) -> str:
    return urlsplit(url)._replace(path="/postgres").geturl()


def redis_db_url(url: str, db: int) -> str:
    """``url`` with its database number replaced by ``db``."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{db}"))


@contextlib.contextmanager
def launched_platform(
    services: Services,
    var_dir: Path,
    database: str,
    redis_db: int | None = None,
    flush_redis: bool = False,
    host_worker: bool = True,
    settings: dict[str, str] | None = None,
    web_workers: int = 1,
) -> Iterator[Platform]:
    """A launched stack on ``services``, stopped and its database dropped on exit.

    PostgreSQL: a fresh database named ``database`` on the server (dropped on
    exit); otherwise SQLite in ``var_dir``. Redis: the services' server, on db
    ``redis_db`` when given (flushed first only with ``flush_redis``, for a db
    that is the caller's own); otherwise an embedded Redis in ``var_dir``.
    ``host_worker=False`` starts no CPU host worker (a caller acting as one). ``settings``:
    environment variables over the stack's own (a benchmark's production values).
    ``web_workers``: gunicorn's processes, one for the tests (a second costs each stack its
    CPU and memory), two as under ``make run`` for a benchmark of what users run.
    """
    drop_database = None
    if services.database_url:
        database_url, drop_database = create_postgres_database(services.database_url, database)
    else:
        database_url = f"sqlite:///{var_dir / (database + '.sqlite3')}"
    embedded = None
    try:
        if services.redis_url:
            broker_url = services.redis_url
            if redis_db is not None:
                broker_url = redis_db_url(broker_url, redis_db)
            if flush_redis:
                import redis

                redis.Redis.from_url(broker_url).flushdb()
        else:
            embedded = stack.EmbeddedRedis(
                var_dir / "redis" / "redis.sock", lambda name, line: None
            )
            embedded.start()
            broker_url = embedded.url
        platform = Platform(var_dir, database_url, broker_url, settings, web_workers)
        try:
            yield platform.launch(host_worker=host_worker)
        finally:
            platform.shutdown()
    finally:
        if embedded is not None:
            embedded.stop()
        if drop_database is not None:
            drop_database()


def prepare_run_user(work: Path, interpreters: list[str], slots: int = 1) -> None:
    """As root, a worker's runs execute as the run-user pool's users, one per run, as under
    ``make run``: the pool made here if missing (as large as the worker's ``slots`` at
    least), and each of its users let through the folders above the interpreters, this
    checkout and the work directory (a ``mktemp -d`` folder and a venv under /root are
    root's alone). Idempotent; the pool is the machine's, shared by every stack on it."""
    if os.geteuid() != 0:
        return
    users = runuser.ensure_pool(max(runuser.default_pool_size(), slots))
    work.mkdir(parents=True, exist_ok=True)
    folders = [str(work), str(REPO_DIR)]
    for python in interpreters:
        folders += [os.path.dirname(os.path.abspath(python)), python]
    for user in users:
        runuser.grant_traverse(user.name, folders)


class Platform:
    """One running stack and a token client for its API."""

    def __init__(
        self,
        var_dir: Path,
        database_url: str,
        broker_url: str,
        settings: dict[str, str] | None = None,
        web_workers: int = 1,
    ) -> None:
        self.var_dir = var_dir
        self.web_workers = web_workers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.broker_url = broker_url
        self.env = stack.child_env(
            {
                "DJANGO_SETTINGS_MODULE": "npulab.settings",
                "DATABASE_URL": database_url,
                "NPULAB_BROKER_URL": broker_url,
                "NPULAB_VAR_DIR": str(var_dir),
                "NPULAB_SECRET_KEY": "e2e-only-not-a-secret",
                "NPULAB_SCHEDULER_TICK_S": "1",
                script_env.HEARTBEAT_S: "1",
                "NPULAB_WORKER_HEARTBEAT_S": "1",
                "NPULAB_RUN_CLAIM_GRACE_S": "3",
                # A lost host and its runs are noticed in seconds, not minutes.
                "NPULAB_HOST_HEARTBEAT_TIMEOUT_S": "8",
                "NPULAB_RUN_HEARTBEAT_TIMEOUT_S": "12",
                # The session's tests lose runs on purpose, several on one host: that must
                # not make the shared host unhealthy for the tests after them (docs/health.md).
                "NPULAB_HEALTH_INFRA_FAILURES": "1000",
                # tests/e2e/test_stability_e2e.py injects a consistency mismatch.
                "NPULAB_STABILITY_ALLOW_FAULTS": "true",
                "NPULAB_HEALTH_HEARTBEAT_MAX_AGE_S": "8",
                # The tests poll runs far faster than any pipeline would.
                "NPULAB_API_RATE": "100000/min",
                "DJANGO_SUPERUSER_USERNAME": USER,
                "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
                "DJANGO_SUPERUSER_EMAIL": "e2e@example.invalid",
                **(settings or {}),
            }
        )
        self.logs = var_dir / "logs"
        # The host workers' work directories, outside pytest's temporary root: each pytest
        # session chmods that root to 700 at its start, which masks the run user's ACL
        # entry on it and fails the runs of a session already going (a second session on
        # the machine, a helper's).
        self.work_root = Path(tempfile.mkdtemp(prefix="npulab-e2e-work-"))
        self.logs.mkdir(parents=True, exist_ok=True)
        self._log_lock = threading.Lock()
        self.processes: dict[str, stack.ManagedProcess] = {}
        self.session = requests.Session()
        # The session cookie of the browser's first login (log_in).
        self._browser_cookies: list[dict[str, Any]] = []
        # gunicorn closes a keep-alive connection idle for 2 s; a request sent just as it
        # does is reset. An idempotent one (GET, PUT, DELETE) is sent again; a POST's reset
        # is the test's to see.
        retry = Retry(total=2, connect=2, read=2, status=0, other=0, redirect=0)
        self.session.mount("http://", HTTPAdapter(max_retries=retry))

    def launch(self, host_worker: bool = True) -> Platform:
        """Migrate, make a user and the host's token, start everything, wait for the host.

        A fresh database is a copy of a migrated one with the user (harness.templates). The
        tokens are issued in one Django start-up, while gunicorn and Celery make theirs.
        """
        if not templates.copy_migrated(self.env, self._migrate):
            self._migrate(self.env)
        commands = [("api_token", USER)]
        if host_worker:
            commands.append(("host_token", HOST, "--labels", ""))
        with ThreadPoolExecutor(1) as pool:
            issuing = pool.submit(self.manage_each, *commands)
            web = self.start(
                "web", stack.web_argv("127.0.0.1", self.port, workers=self.web_workers)
            )
            self.start("control", stack.control_argv(self.var_dir / "celerybeat-schedule"))
            stack.wait_for_http(f"{self.url}/healthz", timeout=180, process=web)
            api_token, *host_token = issuing.result()
        self.session.headers["Authorization"] = f"Token {api_token}"
        if not host_worker:
            return self
        self._write_token(HOST, host_token[0])
        self.start_worker()
        self.wait_online(HOST)
        return self

    def _migrate(self, env: dict[str, str]) -> None:
        self.manage_each(("migrate", "--noinput"), ("createsuperuser", "--noinput"), env=env)

    def wait_online(self, *hosts: str, timeout: float = 60) -> None:
        """Until each of ``hosts`` has registered and is online (one deadline for all)."""
        deadline = time.monotonic() + timeout
        pause = pauses()
        for host in hosts:
            while self.api("GET", f"hosts/{host}/").json().get("status") != "online":
                if time.monotonic() > deadline:
                    raise RuntimeError(f"host {host} did not register\n" + self.tail())
                time.sleep(next(pause))

    def shutdown(self) -> None:
        # All at once: one after another, a stack took 3 to 5 s to stop. A host worker
        # stopping gives up on what it still had to send, so the web server may go first.
        with ThreadPoolExecutor(max(len(self.processes), 1)) as pool:
            list(pool.map(stack.ManagedProcess.stop, self.processes.values()))
        shutil.rmtree(self.work_root, ignore_errors=True)

    def echo(self, name: str, line: str) -> None:
        with self._log_lock, open(self.logs / f"{name}.log", "a") as handle:
            handle.write(line + "\n")

    def manage(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            [sys.executable, str(REPO_DIR / "manage.py"), *args],
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=commands_.TIMEOUT_S,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr}")
        return done.stdout.strip()

    def manage_each(self, *commands: Sequence[str], env: dict[str, str] | None = None) -> list[str]:
        """Each of ``commands`` in one Django start-up (harness.commands): their outputs."""
        return commands_.manage_each(env or self.env, *commands)

    def _write_token(self, host: str, token: str) -> Path:
        path = self.var_dir / f"{host}.token"
        path.write_text(token)
        path.chmod(0o600)
        return path

    def start(self, name: str, argv: list[str]) -> stack.ManagedProcess:
        process = stack.ManagedProcess(name, argv, self.env, self.echo)
        process.start()
        self.processes[name] = process
        return process

    def start_web(self) -> None:
        web = self.start("web", stack.web_argv("127.0.0.1", self.port, workers=self.web_workers))
        stack.wait_for_http(f"{self.url}/healthz", timeout=180, process=web)

    def stop_web(self) -> None:
        self.processes["web"].stop()

    def start_worker(
        self, host: str = HOST, *extra: str, devices: int | None = None, labels: str = ""
    ) -> None:
        """The host worker of ``host`` (a second one gets its own token and work directory);
        ``extra``: more of its command-line flags; ``labels``: an operator's, for a new host."""
        token = self.var_dir / f"{host}.token"
        if not token.exists():
            self._write_token(host, self.manage("host_token", host, "--labels", labels))
        work = self.run_dir(0, host=host).parents[2]
        interpreters = [sys.executable] + [
            value for flag, value in itertools.pairwise(extra) if flag == "--mindspore-python"
        ]
        prepare_run_user(work, interpreters, devices or 1)
        argv = stack.host_worker_argv(self.url, token, self.broker_url, work, devices=devices)
        self.start(f"worker-{host}", [*argv, *extra])

    def kill_worker(self, host: str = HOST) -> None:
        """kill -9 the host worker; the runs it started live on in their own sessions."""
        process = self.processes[f"worker-{host}"].process
        assert process is not None
        process.kill()
        process.wait()

    def kill_run_processes(self, run_id: int, attempt: int = 1) -> None:
        """What a dead host does to its runs: every process of the attempt is gone."""
        run_dir = self.run_dir(run_id, attempt)
        kill_run_processes(str(run_dir), int((run_dir / SUPERVISOR_PID).read_text()))

    # -- the API, as a user ---------------------------------------------------

    def api(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self.session.request(method, f"{self.url}/api/v1/{path}", timeout=30, **kwargs)

    def log_in(self, page: Any) -> None:
        """Log a Playwright page in as the e2e user and open the dashboard: through the login
        form, as a person would, the first time; then with the session that login gave,
        for as long as the platform keeps it. Each login costs the web server most of a
        second of CPU hashing the password, which the tests' runs need more."""
        if self._browser_cookies:
            page.context.add_cookies(self._browser_cookies)
            page.goto(f"{self.url}/")
            if page.url == f"{self.url}/":
                return
        page.goto(f"{self.url}/login/")
        page.fill("#id_username", USER)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{self.url}/")
        self._browser_cookies = page.context.cookies(self.url)

    def submit(self, **spec: Any) -> dict[str, Any]:
        response = self.api("POST", "runs/", json={"kind": "smoke", "device_type": "cpu", **spec})
        if response.status_code != 201:
            raise AssertionError(response.text)
        return response.json()

    def run(self, run_id: int) -> dict[str, Any]:
        response = self.api("GET", f"runs/{run_id}/")
        if response.status_code != 200:
            raise AssertionError(response.text)
        return response.json()

    def wait(self, run_id: int, statuses: set[str] = TERMINAL, timeout: float = 180) -> dict:
        deadline = time.monotonic() + timeout
        pause = pauses()
        while True:
            run = self.run(run_id)
            if run["status"] in statuses:
                return run
            if time.monotonic() > deadline:
                raise AssertionError(f"run {run_id} still {run['status']}: {run}\n{self.tail()}")
            time.sleep(next(pause))

    def wait_for_stored_checkpoint(self, run_id: int, timeout: float = 120) -> dict:
        """The run once one of its checkpoints is stored; it must be active until then."""
        deadline = time.monotonic() + timeout
        pause = pauses()
        while True:
            run = self.run(run_id)
            if any(c["status"] == "stored" for c in run["checkpoints"]):
                return run
            assert run["status"] in ("queued", "dispatched", "running"), run
            assert time.monotonic() < deadline, self.tail()
            time.sleep(next(pause))

    def run_dir(self, run_id: int, attempt: int = 1, host: str = HOST) -> Path:
        work = self.work_root / ("worker" if host == HOST else f"worker-{host}")
        return work / "runs" / str(run_id) / f"attempt-{attempt}"

    def tail(self, lines: int = 30) -> str:
        parts = []
        for log in sorted(self.logs.glob("*.log")):
            parts.append(f"--- {log.name}\n" + "\n".join(log.read_text().splitlines()[-lines:]))
        return "\n".join(parts)
