"""``python -m workers``: start the host worker."""

from __future__ import annotations

import logging
import os
import sys
import threading

from workers.host import runuser
from workers.host.agent import HostAgent, reap_orphans
from workers.host.celery_app import app, bind_agent
from workers.host.client import PlatformClient, PlatformRejected
from workers.host.config import HostConfig
from workers.host.devices import DeviceDetectionError
from workers.host.telemetry import start as start_telemetry
from workers.processes import LockHeld, hold_lock

log = logging.getLogger("workers")

WORKER_LOCK_FILE = ".worker.lock"


def main(argv: list[str] | None = None) -> int:
    config = HostConfig.from_args(argv)
    logging.basicConfig(
        level=config.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    os.makedirs(config.work_dir, exist_ok=True)
    # One worker process per work directory: a second one would take the first's live
    # runs for orphans and kill them. The kernel releases the lock when this process
    # dies however it dies, and the runs it started do not inherit it.
    try:
        lock_fd = hold_lock(os.path.join(config.work_dir, WORKER_LOCK_FILE))
    except LockHeld as exc:
        log.error(
            "another host worker (pid %s) is running on the work directory %s: "
            "stop it, or give this one its own --work-dir",
            exc.pid or "unknown",
            config.work_dir,
        )
        return 1
    for run_dir in reap_orphans(config.work_dir):
        log.warning("killed a run left behind by an earlier worker process: %s", run_dir)
    try:
        run_user = runuser.resolve(config.run_user, config.python, config.work_dir)
    except runuser.RunUserError as exc:
        log.error("%s", exc)
        return 1
    if run_user is not None:
        log.info("runs execute as %s (groups %s)", run_user.name, run_user.group_names())
    elif os.geteuid() == 0:
        log.warning(
            "runs execute as root and can read all this worker can (its token included): "
            "set --run-user / NPULAB_RUN_USER to an unprivileged user"
        )
    agent = HostAgent(config, PlatformClient(config.url, config.token), run_user)
    try:
        agent.register()
    except PlatformRejected as exc:
        log.error("the platform at %s refused this host: %s", config.url, exc)
        return 1
    except DeviceDetectionError as exc:
        log.error("%s", exc)
        return 1
    bind_agent(agent)
    agent.send_snapshot_soon()
    stop = threading.Event()
    threading.Thread(
        target=agent.heartbeat_forever, args=(stop,), name="heartbeat", daemon=True
    ).start()
    start_telemetry(
        agent.client,
        agent.device_type,
        [device["index"] for device in agent.devices],
        config.telemetry_s,
        stop,
        config.telemetry_send_s,
    )
    app.conf.broker_url = config.broker_url
    # A run leases at least one device, so more slots than devices never fill.
    slots = max(1, len(agent.devices))
    try:
        app.worker_main(
            [
                "worker",
                "--queues",
                agent.queue,
                "--pool",
                "threads",
                "--concurrency",
                str(slots),
                "--hostname",
                f"{agent.name}@%h",
                "--loglevel",
                config.log_level,
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ]
        )
    finally:
        stop.set()
        os.close(lock_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
