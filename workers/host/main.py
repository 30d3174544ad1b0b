"""``python -m workers``: start the host worker."""

from __future__ import annotations

import logging
import os
import sys
import threading
from urllib.parse import urlsplit

from workers.host import runuser, sandbox
from workers.host.agent import HostAgent, reap_orphans
from workers.host.celery_app import app, bind_agent
from workers.host.client import PlatformClient, PlatformRejected
from workers.host.config import HostConfig
from workers.host.devices import DeviceDetectionError, detect
from workers.host.forwarder import forward_left
from workers.host.left import finish_left
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
    left = reap_orphans(config.work_dir)
    for run_dir, killed in left:
        if killed:
            log.warning("killed a run left behind by an earlier worker process: %s", run_dir)
    try:
        run_users, run_sandbox = confine(config, len(detect(config.device_type, config.devices)[1]))
    except (runuser.RunUserError, sandbox.SandboxError, DeviceDetectionError) as exc:
        log.error("%s", exc)
        return 1
    client = PlatformClient(config.url, config.token)
    # Before registering, while the platform still takes those attempts' events.
    forward_left(client, [run_dir for run_dir, _ in left])
    agent = HostAgent(config, client, run_users, run_sandbox)
    try:
        agent.register()
    except PlatformRejected as exc:
        log.error("the platform at %s refused this host: %s", config.url, exc)
        return 1
    except DeviceDetectionError as exc:
        log.error("%s", exc)
        return 1
    bind_agent(agent)
    finish_left(agent, [run_dir for run_dir, killed in left if not killed])
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


def confine(
    config: HostConfig, slots: int = 1
) -> tuple[runuser.RunUsers | None, sandbox.Sandbox | None]:
    """Who runs execute as and in which sandbox, checked: an error names what is missing.

    A root worker's runs never execute as root, and by default each of the ``slots`` runs
    it executes at once as a user of its own (the pool). In the sandbox the run users
    reach the interpreter through the sandbox's own mounts; without one, on the host's
    paths, which each of them is checked for. The folders and processes this worker's
    earlier life left to its run users are taken back first.
    """
    run_users = runuser.choose(config.run_user, max(1, slots))
    if run_users is not None:
        # Before the checks: a pool user is checked only while free, and the processes an
        # earlier run left would keep theirs taken.
        for folder in run_users.recover(config.work_dir):
            log.info("took back %s from its run user", folder)
    hidden = [config.token_file] if config.token_file else []
    run_sandbox = sandbox.resolve(
        config.sandbox,
        config.python,
        config.work_dir,
        hidden,
        run_users,
        config.sandbox_read,
        config.own_network,
    )
    if run_sandbox is None and run_users is not None:
        runuser.check_can_run(run_users, config.python, config.work_dir)
    if run_users is not None:
        log.info("runs execute as %s", run_users.describe())
        if not run_users.exclusive:
            log.warning(
                "runs share one user: two at once can read each other's directories and "
                "processes; the default (--run-user auto) gives each its own (docs/security.md)"
            )
    else:
        log.info("runs execute as this worker's user (uid %d)", os.geteuid())
    exposed = open_broker(config.broker_url)
    if exposed and not config.own_network:
        log.warning(
            "the broker at %s asks no password, and a run reaches what this host reaches: "
            "give the broker a password (in NPULAB_BROKER_URL), or keep runs off the network "
            "(--run-network none; docs/security.md)",
            exposed,
        )
    if run_sandbox is not None:
        log.info(
            "runs execute in a bubblewrap sandbox (%s)%s",
            run_sandbox.bwrap,
            ", each with a loopback of its own and no other network" if config.own_network else "",
        )
    else:
        shared = run_users is None or not run_users.exclusive
        log.warning(
            "runs execute without a filesystem sandbox: a run can read %s (docs/security.md)",
            "what its user can, other runs' directories included"
            if shared
            else "what every user of this host may read",
        )
    return run_users, run_sandbox


def open_broker(url: str) -> str:
    """``host:port`` of a broker reached over TCP with no password in its URL, else "".

    Through such a broker a run could read and forge every host's task messages. A
    socket (the embedded Redis of ``make run``, in the worker's closed ``var/``) is
    the file system's business, not the network's.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return ""  # Celery reports a malformed URL itself
    if parts.scheme not in ("redis", "rediss", "amqp", "amqps", "pyamqp") or not parts.hostname:
        return ""
    if parts.password:
        return ""
    return f"{parts.hostname}:{port}" if port else parts.hostname


if __name__ == "__main__":
    sys.exit(main())
