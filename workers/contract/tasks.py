"""Celery task and queue names: the web sends them, the workers consume them."""

from __future__ import annotations

CONTROL_QUEUE = "control"
# Control plane (the web's own worker).
# The beat's one periodic task: it runs the passes below (settings.CONTROL_TICK) in turn.
TICK = "control.tick"
PLACE_RUNS = "runs.place_runs"
SWEEP_RUNS = "runs.sweep_runs"
SWEEP_HOSTS = "hosts.sweep_hosts"
SWEEP_HEALTH = "health.sweep_health"
DELIVER_HEALTH_WEBHOOK = "health.deliver_webhook"
EXPIRE_UPLOADS = "artifacts.expire_uploads"
# A stored trace's summary and timeline index (npulab.profiles).
SUMMARISE_PROFILE = "profiles.summarise_profile"
# Ends profiles left "summarising" by a worker that died.
SWEEP_PROFILES = "profiles.sweep_profiles"
# Device telemetry: raw samples into minute rollups, then retention of both.
ROLL_UP_TELEMETRY = "telemetry.roll_up"
# Host workers: "execute attempt K of run N", on the host's own queue.
EXECUTE_RUN = "runs.execute_run"


def host_queue(host_name: str) -> str:
    """The queue a host worker consumes."""
    return "host." + host_name
