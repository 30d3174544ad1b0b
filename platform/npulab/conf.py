"""Strict parsers for settings read from the environment.

Each raises ImproperlyConfigured naming the variable, so a typo in a
deployment fails at start-up instead of running with a silent default.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_PERIODS = {"s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600, "hour": 3600, "d": 86400, "day": 86400}


class Env:
    """Typed access to one environment mapping."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ

    def str(self, name: str, default: str) -> str:
        return self.environ.get(name, default)

    def bool(self, name: str, default: bool) -> bool:
        raw = self.environ.get(name)
        if raw is None:
            return default
        value = raw.strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise ImproperlyConfigured(f"{name} must be true or false, got {raw!r}")

    def int(self, name: str, default: int, minimum: int | None = None) -> int:
        raw = self.environ.get(name)
        if raw is None or raw.strip() == "":
            return default
        try:
            value = int(raw)
        except ValueError:
            raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
        if minimum is not None and value < minimum:
            raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
        return value

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        """One of ``choices`` (case-insensitive), or ``default`` when unset or empty."""
        raw = self.environ.get(name)
        if raw is None or raw.strip() == "":
            return default
        value = raw.strip().lower()
        if value not in choices:
            raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
        return value

    def rate(self, name: str, default: str) -> tuple[int, int]:
        """``N/period`` (period: s, min, h or day) as (N requests, period in seconds)."""
        raw = self.environ.get(name) or default
        count, _, period = raw.strip().partition("/")
        seconds = _PERIODS.get(period.strip().lower())
        if not count.strip().isdigit() or int(count) < 1 or seconds is None:
            raise ImproperlyConfigured(
                f"{name} must be a number of requests per s, min, h or day "
                f"(e.g. 1200/min), got {raw!r}"
            )
        return int(count), seconds

    def list(self, name: str, default: list[str]) -> list[str]:
        raw = self.environ.get(name)
        if raw is None:
            return list(default)
        return [item.strip() for item in raw.split(",") if item.strip()]

    def path(self, name: str, default: Path) -> Path:
        raw = self.environ.get(name)
        return Path(raw).expanduser().resolve() if raw else default

    def database(self, name: str, default: str) -> dict:
        url = self.environ.get(name) or default
        try:
            config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name} is not a database URL: {exc}") from None
        if config["ENGINE"] == "django.db.backends.sqlite3":
            # IMMEDIATE: a writer takes the lock when its transaction begins,
            # so two processes never deadlock upgrading read locks. WAL lets
            # readers (the web pages) go on while a worker writes. Connections are kept, as
            # on PostgreSQL: opening one and its PRAGMAs cost a request 0.9 ms, most of a
            # /healthz (docs/benchmarks.md, "Ingestion per request").
            config["OPTIONS"] = {
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            }
        return config

    def secret_key(self, name: str, file_name: str, default_file: Path) -> str:
        """The secret key: from ``name``, else from the file ``file_name`` points to."""
        value = self.environ.get(name, "").strip()
        if value:
            return value
        path = self.path(file_name, default_file)
        try:
            value = path.read_text().strip()
        except OSError:
            value = ""
        if not value:
            raise ImproperlyConfigured(
                f"No secret key: set {name}, or {file_name} to a file holding one "
                f"(`make run` writes {default_file} on first start)."
            )
        return value
