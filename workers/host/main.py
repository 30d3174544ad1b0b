"""``python -m workers``: start the host worker."""

from __future__ import annotations

import logging
import sys
import threading

from workers.host.agent import HostAgent, reap_orphans
from workers.host.celery_app import app, bind_agent
from workers.host.client import PlatformClient, PlatformRejected
from workers.host.config import HostConfig
from workers.host.devices import DeviceDetectionError

log = logging.getLogger("workers")


def main(argv: list[str] | None = None) -> int:
    config = HostConfig.from_args(argv)
    logging.basicConfig(
        level=config.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for run_dir in reap_orphans(config.work_dir):
        log.warning("killed a run left behind by an earlier worker process: %s", run_dir)
    agent = HostAgent(config, PlatformClient(config.url, config.token))
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
