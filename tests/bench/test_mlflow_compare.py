"""bench/mlflow_compare.py's arguments and report, on made-up numbers: nothing is timed here."""

from __future__ import annotations

from typing import Any

import pytest

from bench import mlflow_compare


def start(**measures: Any) -> dict[str, Any]:
    """One server start's result, as one_start() records it, with only what the test needs."""
    return {"gate": {"met": True, "waited_s": 2.0, "busy_pct": 4.0, "load_1m": 0.3}, **measures}


def report(npulab: list[dict[str, Any]], mlflow: list[dict[str, Any]]) -> dict[str, Any]:
    results = {"postgresql": {"npulab": npulab, "MLflow": mlflow}}
    return {
        "settings": {"points": 100_000},
        "load_average_1m": {"start": 0.2, "end": 0.4},
        "results": results,
        "summary": mlflow_compare.summarize(results),
    }


def test_full_and_quick_defaults() -> None:
    full = mlflow_compare.parse_args([])
    assert (full.rounds, full.points, full.loop_points) == (2, 100_000, 100_000)
    assert full.databases == ["sqlite", "postgresql"]
    assert full.sides == ["npulab", "MLflow"]
    quick = mlflow_compare.parse_args(["--quick", "--databases", "sqlite", "--rounds", "3"])
    assert (quick.rounds, quick.points, quick.databases) == (3, 20_000, ["sqlite"])


@pytest.mark.parametrize(
    "argv", [["--databases", "mysql"], ["--sides", "wandb"], ["--points", "5000"]]
)
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        mlflow_compare.parse_args(argv)


def test_medians_advantages_and_targets() -> None:
    ours = [
        start(
            ingest_1000={"points_per_s": value, "server_cpu_per_request": {"total_ms": 6.0}},
            ingest_10000={"points_per_s": 100_000},
            whole={"rows": {"ms": {"p50": 200.0}}, "columns": {"ms": {"p50": 80.0}}},
            loop={"readable_after_end_s": 0.4},
            storage={"bytes_per_point": 150.0},
        )
        for value in (90_000, 150_000, 60_000)
    ]
    theirs = [
        start(
            ingest_1000={"points_per_s": 5_000},
            ingest_10000={"skipped": "at most 1,000"},
            whole={"rows": {"ms": {"p50": 5_000.0}}},
        ),
        {"error": "RuntimeError: a start that failed"},
    ]
    made = report(ours, theirs)
    summary = made["summary"]["postgresql"]
    assert summary["measures"]["ingest_1000.points_per_s"] == {
        "npulab": 90_000,
        "MLflow": 5_000,
        "advantage": 18.0,
    }
    assert summary["small_of_large_batch_pct"] == 90.0
    # The fastest whole reads of each side are set against each other.
    assert summary["whole_read_fastest_advantage"] == 62.5

    table = mlflow_compare.markdown(made)
    assert "| ingest, 1,000 points a request (points/s) | 90,000 | 5,000 | 18× |" in table
    assert "| PostgreSQL: ingest at 1,000 a request ≥ 25× MLflow | 18 | **missed** |" in table
    assert "| PostgreSQL: whole read (fastest forms) ≥ 50× get-history | 62.5 | met |" in table
    assert "| PostgreSQL: storage ≤ 170 B a point (B) | 150.0 | met |" in table
    assert "whole read, CSV" not in table  # measured by neither side
    assert "**1 start(s) failed**" in table
