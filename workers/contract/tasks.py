"""Celery task and queue names: the web sends them, the workers consume them."""

from __future__ import annotations

CONTROL_QUEUE = "control"
# Control plane (the web's own worker).
PLACE_RUNS = "runs.place_runs"
SWEEP_RUNS = "runs.sweep_runs"
SWEEP_HOSTS = "hosts.sweep_hosts"
EXPIRE_UPLOADS = "artifacts.expire_uploads"
# Host workers: "execute attempt K of run N", on the host's own queue.
EXECUTE_RUN = "runs.execute_run"


def host_queue(host_name: str) -> str:
    """The queue a host worker consumes."""
    return "host." + host_name
