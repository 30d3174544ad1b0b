"""What the benchmark scripts share: percentiles, where their reports go, their database."""

from __future__ import annotations

import json
import statistics
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
