"""Collect an environment snapshot in a run's interpreter and send it to the platform."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from typing import Any

from workers.host.client import PlatformClient, PlatformError

log = logging.getLogger(__name__)

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECT_TIMEOUT_S = 300


class SnapshotFailed(Exception):
    """No snapshot could be collected or sent; the message says why."""


def collect(python: str, extra_args: list[str] | None = None) -> dict[str, Any]:
    """Run ``python -m workers.collect`` in ``python``: a snapshot as that interpreter sees it."""
    env = dict(os.environ)
    env["PYTHONPATH"] = _PACKAGE_ROOT + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    for key in ("NPULAB_HOST_TOKEN", "NPULAB_BROKER_URL"):
        env.pop(key, None)
    try:
        done = subprocess.run(
            [python, "-m", "workers.collect", *(extra_args or [])],
            env=env,
            capture_output=True,
            text=True,
            timeout=COLLECT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SnapshotFailed(f"cannot run the collector with {python}: {exc}") from exc
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise SnapshotFailed(f"the collector failed in {python}: {last}")
    try:
        return json.loads(done.stdout)
    except ValueError as exc:
        raise SnapshotFailed(f"the collector printed no JSON: {exc}") from exc


def collect_and_send(
    client: PlatformClient, python: str, run_id: int | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Collect and upload; returns the platform's reply and the snapshot. Raises
    SnapshotFailed."""
    snapshot = collect(python)
    try:
        reply = client.upload_snapshot(snapshot, run_id)
    except PlatformError as exc:
        raise SnapshotFailed(f"the platform did not take the snapshot: {exc}") from exc
    log.info(
        "snapshot %s sent%s: %s",
        reply.get("hash", "")[:12],
        f" for run {run_id}" if run_id else "",
        reply.get("change", ""),
    )
    return reply, snapshot
