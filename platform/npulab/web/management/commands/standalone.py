"""``manage.py standalone``: the whole platform in one foreground command (``make run``)."""

from __future__ import annotations

import os
import secrets
import signal
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from npulab.accounts import tokens
from npulab.hosts.models import Host
from npulab.hosts.services import do_create_host, do_issue_host_token
from npulab.web import stack
from workers.contract.frameworks import MINDSPORE_LABEL

ADMIN_USERNAME = "admin"
LOCAL_HOST = "local"


class Command(BaseCommand):
    help = (
        "Migrate, create an admin, then run the web server, the control worker with beat and a "
        "CPU host worker (and an embedded Redis when NPULAB_BROKER_URL is unset) until Ctrl-C."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--bind", default=os.environ.get("BIND", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument(
            "--no-host-worker", action="store_true", help="do not start the local CPU worker"
        )
        parser.add_argument(
            "--hosts",
            type=int,
            default=int(os.environ.get("HOSTS", "1")),
            help="local CPU host workers, each its own host (local, local-2, ...), so that "
            "runs across hosts can be tried on one machine",
        )
        parser.add_argument(
            "--mindspore-python",
            default="",
            help="an interpreter with MindSpore (make mindspore): the local hosts run "
            f"framework: mindspore runs in it and carry the label '{MINDSPORE_LABEL}'",
        )

    def handle(
        self,
        *args: Any,
        bind: str,
        port: int,
        no_host_worker: bool,
        hosts: int,
        mindspore_python: str,
        **options,
    ) -> None:
        if hosts < 1:
            raise CommandError("--hosts must be at least 1")
        var_dir: Path = settings.VAR_DIR
        var_dir.mkdir(parents=True, exist_ok=True)
        keep_private(var_dir)
        self._print_lock = threading.Lock()
        logs = stack.LogRouter(var_dir / "log", self._print)
        self._stopping = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: self._stopping.set())

        call_command("migrate", interactive=False, verbosity=0)
        login = self._ensure_admin()
        url = f"http://{'127.0.0.1' if bind in ('0.0.0.0', '::') else bind}:{port}"  # noqa: S104

        redis_server = None
        broker_url = os.environ.get("NPULAB_BROKER_URL", "")
        if not broker_url:
            redis_server = stack.EmbeddedRedis(Path(settings.EMBEDDED_REDIS_SOCKET), logs)
            redis_server.start()
            broker_url = redis_server.url
        env = stack.child_env({"NPULAB_BROKER_URL": broker_url})

        access_log = logs.log_dir / "web-access.log"
        web = stack.ManagedProcess(
            "web",
            stack.web_argv(
                bind,
                port,
                access_log=access_log,
                trusted_proxies=settings.NPULAB["TRUSTED_PROXIES"],
            ),
            env,
            logs,
        )
        control = stack.ManagedProcess(
            "control", stack.control_argv(var_dir / "celerybeat-schedule"), env, logs
        )
        processes = [web, control]
        for number in range(1, 0 if no_host_worker else hosts + 1):
            # The first keeps the names a single local host always had.
            suffix = "" if number == 1 else f"-{number}"
            token_file = self._local_host_token(
                LOCAL_HOST + suffix, var_dir / f"local-host{suffix}.token"
            )
            worker_argv = stack.host_worker_argv(
                url, token_file, broker_url, var_dir / ("worker" + suffix)
            )
            if mindspore_python:
                # Whoever starts the stack is its operator: the label is theirs to give.
                self._label_local_host(LOCAL_HOST + suffix, MINDSPORE_LABEL)
                worker_argv += ["--mindspore-python", mindspore_python]
            processes.append(
                stack.ManagedProcess(
                    "worker" + suffix,
                    worker_argv,
                    env,
                    logs,
                )
            )
        gave_up: stack.GaveUp | None = None
        try:
            web.start()
            stack.wait_for_http(f"{url}/healthz", timeout=60, process=web)
            for process in processes[1:]:
                process.start()
            self._banner(url, login, broker_url, logs.log_dir)
            children: list[stack.Child] = [*processes]
            if redis_server is not None:
                children.insert(0, redis_server)
            supervisor = stack.Supervisor(children, lambda line: logs("stack", _record(line)))
            while not self._stopping.wait(0.5):
                supervisor.check()
        except stack.GaveUp as error:
            gave_up = error
        finally:
            # The host worker first, so it can still report to the web server.
            for process in reversed(processes):
                process.stop()
            if redis_server is not None:
                redis_server.stop()
            logs.close()
        if gave_up:
            raise CommandError(
                f"{gave_up}, five times within a minute of starting; "
                f"its log: {_shown(logs.path(gave_up.child.name))}"
            )
        self.stdout.write("npulab stopped.")

    def _print(self, line: str) -> None:
        with self._print_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def _ensure_admin(self) -> str:
        users = get_user_model()
        if users.objects.filter(username=ADMIN_USERNAME).exists():
            return (
                f"{ADMIN_USERNAME} (password as set on first start; "
                f"reset with `.venv/bin/python manage.py changepassword {ADMIN_USERNAME}`)"
            )
        password = os.environ.get("NPULAB_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        users.objects.create_superuser(ADMIN_USERNAME, "", password)
        if os.environ.get("NPULAB_ADMIN_PASSWORD"):
            return f"{ADMIN_USERNAME} / the password in NPULAB_ADMIN_PASSWORD"
        return f"{ADMIN_USERNAME} / {password}   (shown once: note it now)"

    def _local_host_token(self, name: str, path: Path) -> Path:
        """The token file of a local CPU host worker, renewed if it no longer matches."""
        host = Host.objects.filter(name=name).first() or do_create_host(name)
        current = path.read_text().strip() if path.exists() else ""
        if not current or tokens.digest(current) != host.token_digest:
            current = do_issue_host_token(host)
            path.touch(mode=0o600)
            path.write_text(current)
        return path

    def _label_local_host(self, name: str, label: str) -> None:
        host = Host.objects.get(name=name)
        if label not in host.labels:
            host.labels = [*host.labels, label]
            host.save(update_fields=["labels", "updated"])

    def _banner(self, url: str, login: str, broker_url: str, log_dir: Path) -> None:
        database = settings.DATABASES["default"]
        lines = [
            "",
            "npulab is running",
            f"  open      {url}/",
            f"  login     {login}",
            f"  API docs  {url}/api/docs/   (token: .venv/bin/python manage.py api_token admin)",
            f"  database  {database['ENGINE'].rsplit('.', 1)[-1]} {database['NAME']}",
            f"  broker    {broker_url.split('@')[-1]}",
            f"  logs      {_shown(log_dir)}/   (one file a process; below: runs, warnings, errors)",
            "  stop      Ctrl-C",
            "",
        ]
        with self._print_lock:
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()


def keep_private(var_dir: Path) -> None:
    """What the stack writes under ``var/`` (database, secret key, tokens, artifacts, logs)
    is no other user's to read, nor what an earlier start left there.

    The run user may be let through ``var/`` by an ACL entry to reach its run directory
    (``make run`` as root on a host without the sandbox): it must find nothing else it can
    open. Only the bits of other users go; the group bits are the ACL's mask, which keeps
    that entry working.
    """
    os.umask(0o077)
    for path in (var_dir, *var_dir.iterdir()):
        if not path.is_symlink():
            path.chmod(path.stat().st_mode & ~0o007)


def _record(line: str) -> str:
    """A line of the stack's own, as a log record (what the console filter knows)."""
    return f"{datetime.now().isoformat(sep=' ', timespec='milliseconds')} {line}"


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it is under it (var/log), else whole."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
