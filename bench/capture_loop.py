"""The user loop of bench/capture.py: ``mlflow.log_metric`` N times, as an unmodified script does.

    capture_loop.py OUT POINTS          # MLflow's client finds its server in MLFLOW_TRACKING_URI

Logs ``loss`` at steps 0 … POINTS-1, synchronously, or asynchronously when
MLFLOW_ENABLE_ASYNC_LOGGING=true (then flushed before the loop counts as ended). OUT gets
the loop's wall-clock start and end (Unix seconds) and its CPU seconds (the client's own).
It imports nothing of the benchmark.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(out: str, points: int) -> None:
    import mlflow

    asynchronous = os.environ.get("MLFLOW_ENABLE_ASYNC_LOGGING") == "true"
    mlflow.start_run()
    mlflow.log_metric("warmup", 0.0, step=0)
    start, cpu = time.time(), time.process_time()
    for step in range(points):
        mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
    if asynchronous:
        mlflow.flush_async_logging()
    end, cpu = time.time(), time.process_time() - cpu
    with open(out, "w") as handle:
        json.dump({"start": start, "end": end, "cpu": cpu, "points": points}, handle)
    mlflow.end_run()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
