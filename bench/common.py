"""What the benchmark scripts share: percentiles, where their reports go, their database,
the CPU of the processes they run."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import statistics
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

RESULTS = Path(__file__).resolve().parent / "results"
# The benchmarks' stacks use this Redis db on a Redis server; the tests use db 15 and 13
# down (harness/services.py).
BENCH_REDIS_DB = 14


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile: a value that was measured, not interpolated."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def run_for_cpu(command: list[str], **options: Any) -> float:
    """Run ``command`` to its end (``subprocess.run``'s ``options``, ``check=True``); the
    CPU seconds, user and system, of it and everything it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, **options)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def write_report(name: str, report: dict[str, Any]) -> None:
    """Print the report and keep it in bench/results/<name>.json (not committed)."""
    text = json.dumps(report, indent=2)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(text + "\n")


def stats(samples: list[float], scale: float = 1.0, digits: int = 3) -> dict[str, float]:
    """p50/p90/min/max of ``samples`` times ``scale`` (e.g. 1000 for ms)."""
    return {
        "p50": round(statistics.median(samples) * scale, digits),
        "p90": round(percentile(samples, 0.9) * scale, digits),
        "min": round(min(samples) * scale, digits),
        "max": round(max(samples) * scale, digits),
        "n": len(samples),
    }


def database_dsn(server_url: str, database: str) -> str | None:
    """The URL of ``database`` on the PostgreSQL server of ``server_url``; None for SQLite."""
    if not server_url:
        return None
    return urlunsplit(urlsplit(server_url)._replace(path="/" + database))


@contextlib.contextmanager
def migrated_django(embedded: bool, database: str) -> Iterator[None]:
    """Django set up in this process on a database of its own, migrated, for a benchmark
    that drives the platform's code and views with no server: a fresh SQLite file
    (``embedded``), else ``database`` made anew on the PostgreSQL here and dropped after.
    No broker (nothing is placed); the test client's host name is allowed."""
    drop = None
    if embedded:
        folder = tempfile.mkdtemp(prefix=f"{database.replace('_', '-')}-")
        database_url = f"sqlite:///{folder}/db.sqlite3"
    else:
        from harness.services import detect
        from harness.stack import create_postgres_database

        services = detect()
        if services.database_url is None:
            raise SystemExit("no PostgreSQL here: use --embedded")
        database_url, drop = create_postgres_database(services.database_url, database)
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("NPULAB_SECRET_KEY", "bench-only")
    os.environ.setdefault("NPULAB_BROKER_URL", "memory://")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "npulab.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.test.utils import setup_test_environment

    setup_test_environment()
    try:
        call_command("migrate", verbosity=0)
        yield
    finally:
        from django.db import connection

        connection.close()
        if drop is not None:
            drop()
