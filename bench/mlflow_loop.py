"""A training loop's logging, for bench/mlflow_compare.py: one metric a call, nothing else.

Run in the interpreter of the client it measures, never in the benchmark's own:

    mlflow_loop.py npulab OUT POINTS                 # as a training run's entry (workers.track)
    mlflow_loop.py mlflow OUT POINTS URI RUN_ID      # with MLflow's virtualenv's python

Both log ``loss`` at steps 0 … POINTS-1 with the values bench/mlflow_common.py ingests
(the same curve), the npulab side with ``run.log``, the MLflow side with
``mlflow.log_metric(..., synchronous=False)`` in its buffered asynchronous mode
(MLFLOW_ASYNC_LOGGING_BUFFERING_SECONDS=1, set by bench/mlflow_server.py). OUT gets the
loop's wall-clock start and end (Unix seconds, comparable with the benchmark's polls on
the same machine) as soon as the loop ends, then, for MLflow, when its queue was flushed.
Standard library plus the client: it imports nothing of the benchmark.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time


def loss(step: int, points: int) -> float:
    """The curve both sides log, in the loop and in the ingestion (bench/mlflow_common.py)."""
    return 2.3 * math.exp(-step / (points / 5)) + 0.1 + 0.05 * ((step * 7919) % 1000) / 1000


def write(path: str, report: dict) -> None:
    """Replace ``path`` at once: the benchmark reads it while this process goes on."""
    partial = path + ".partial"
    with open(partial, "w") as handle:
        json.dump(report, handle)
    os.replace(partial, path)


def npulab(out: str, points: int) -> None:
    from workers import track

    run = track.init()
    values = [loss(step, points) for step in range(points)]
    started = time.time()
    for step in range(points):
        run.log(step, loss=values[step])
    ended = time.time()
    write(out, {"start": started, "end": ended, "calls": points})


def mlflow(out: str, points: int, uri: str, run_id: str) -> None:
    import mlflow as client

    client.set_tracking_uri(uri)
    values = [loss(step, points) for step in range(points)]
    with client.start_run(run_id=run_id):
        started = time.time()
        for step in range(points):
            client.log_metric("loss", values[step], step=step, synchronous=False)
        ended = time.time()
        report = {"start": started, "end": ended, "calls": points}
        write(out, report)
        client.flush_async_logging()
        report["flushed"] = time.time()
    write(out, report)


if __name__ == "__main__":
    side, path, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if side == "npulab":
        npulab(path, count)
    else:
        mlflow(path, count, sys.argv[4], sys.argv[5])
