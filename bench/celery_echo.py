"""A trivial Celery app, the yardstick of bench/dispatch.py: one task that does nothing.

Its worker runs like the platform's (thread pool, one message prefetched,
acknowledged on receipt, no gossip, mingle or heartbeat) on the broker in
``NPULAB_BROKER_URL``, which also carries the results: one call is a raw
Celery round trip, publish -> worker -> result back to the caller.
"""

from __future__ import annotations

import os

from celery import Celery

QUEUE = "bench.echo"
ECHO = "bench.echo"

app = Celery("npulab-bench-echo")
app.conf.update(
    broker_url=os.environ.get("NPULAB_BROKER_URL"),
    result_backend=os.environ.get("NPULAB_BROKER_URL"),
    task_serializer="json",
    accept_content=["json"],
    result_serializer="json",
    worker_prefetch_multiplier=1,
    task_acks_late=False,
    broker_connection_retry_on_startup=True,
)


@app.task(name=ECHO)
def echo(value: int) -> int:
    return value


def worker_argv(python: str) -> list[str]:
    """The echo worker's command line, run from the repository root."""
    return [
        python,
        "-m",
        "celery",
        "--app",
        "bench.celery_echo",
        "worker",
        "--queues",
        QUEUE,
        "--pool",
        "threads",
        "--concurrency",
        "1",
        "--hostname",
        "bench-echo@%h",
        "--loglevel",
        "WARNING",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]
