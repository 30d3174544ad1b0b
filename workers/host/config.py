"""Host worker settings: command-line flags, each defaulting to an environment variable."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Mapping, Sequence

from workers.contract import script_env
from workers.contract.devices import DEVICE_TYPES
from workers.contract.frameworks import MINDSPORE, MINDSPORE_LABEL
from workers.contract.gang import (
    HCCL_CONNECT_TIMEOUT_RANGE,
    NETWORK_KEYS,
    RUN_NETWORK,
    RUN_NETWORK_HOST,
    RUN_NETWORK_NONE,
    RUN_NETWORKS,
)
from workers.contract.telemetry import DEFAULT_INTERVAL_S, DEFAULT_SEND_S
from workers.host.runenv import DEFAULT_ALLOW, parse_allow


class HostConfig:
    """Everything the host worker is told; nothing here is read from the platform."""

    def __init__(
        self,
        url: str,
        token: str,
        broker_url: str,
        work_dir: str,
        python: str,
        device_type: str | None,
        devices: int | None,
        labels: list[str],
        heartbeat_s: float = 10.0,
        flush_s: float = 0.2,
        claim_retry_s: float = 30.0,
        log_level: str = "INFO",
        telemetry_s: float = DEFAULT_INTERVAL_S,
        telemetry_send_s: float = DEFAULT_SEND_S,
        run_env_allow: Sequence[str] = DEFAULT_ALLOW,
        run_user: str | None = None,
        network: dict | None = None,
        sandbox: str = "auto",
        sandbox_read: Sequence[str] = (),
        token_file: str = "",
        mindspore_python: str = "",
    ):
        self.url = url
        self.token = token
        self.broker_url = broker_url
        self.work_dir = work_dir
        self.python = python
        self.device_type = device_type
        self.devices = devices
        # A MindSpore interpreter makes this a host for MindSpore runs, which need its label.
        self.mindspore_python = mindspore_python
        self.labels = labels + (
            [MINDSPORE_LABEL] if mindspore_python and MINDSPORE_LABEL not in labels else []
        )
        self.heartbeat_s = heartbeat_s
        self.flush_s = flush_s
        self.claim_retry_s = claim_retry_s
        self.log_level = log_level
        self.telemetry_s = telemetry_s  # 0: no device telemetry
        self.telemetry_send_s = telemetry_send_s  # 0: every sample round
        # The worker's environment variables a run inherits (workers.host.runenv).
        self.run_env_allow = list(run_env_allow)
        # Who runs execute as (workers.host.runuser); None: the worker's own user.
        self.run_user = run_user
        # How other hosts reach this one, for runs across hosts (docs/multihost.md).
        self.network = dict(network or {})
        # Whether runs execute in a filesystem sandbox (workers.host.sandbox), and the
        # host's folders every run may read there besides its own (datasets, a site's code).
        self.sandbox = sandbox
        self.sandbox_read = list(sandbox_read)
        # Never mounted in a run's sandbox.
        self.token_file = token_file

    @property
    def own_network(self) -> bool:
        """Whether each run gets a loopback of its own and no other network (--run-network)."""
        return self.network.get(RUN_NETWORK) == RUN_NETWORK_NONE

    def python_for(self, spec: dict) -> str:
        """The interpreter a run executes in: its spec's, else the one for its framework."""
        if spec.get("python"):
            return spec["python"]
        if spec.get("framework") == MINDSPORE and self.mindspore_python:
            return self.mindspore_python
        return self.python

    @classmethod
    def from_args(cls, argv: list[str] | None = None) -> HostConfig:
        env = os.environ
        parser = argparse.ArgumentParser(
            prog="python -m workers",
            description="npulab host worker: executes runs on this host's devices.",
        )
        parser.add_argument("--url", default=env.get("NPULAB_URL", "http://127.0.0.1:8000"))
        parser.add_argument(
            "--token-file",
            default=env.get("NPULAB_HOST_TOKEN_FILE"),
            help="file holding the host token (else NPULAB_HOST_TOKEN)",
        )
        parser.add_argument("--broker-url", default=env.get("NPULAB_BROKER_URL"))
        parser.add_argument(
            "--work-dir",
            default=env.get("NPULAB_WORK_DIR", os.path.expanduser("~/.npulab/work")),
        )
        parser.add_argument(
            "--python",
            default=env.get("NPULAB_RUN_PYTHON", sys.executable),
            help="interpreter that executes runs whose spec names none",
        )
        parser.add_argument(
            "--mindspore-python",
            default=env.get("NPULAB_MINDSPORE_PYTHON", ""),
            help="interpreter with MindSpore for framework: mindspore runs whose spec names "
            f"none; gives the host the label '{MINDSPORE_LABEL}' (default: none)",
        )
        # The variable a run's processes read their device type from names the host's too.
        parser.add_argument(
            "--device-type", choices=DEVICE_TYPES, default=env.get(script_env.DEVICE_TYPE)
        )
        parser.add_argument(
            "--devices",
            type=int,
            default=_int_or_none(env.get("NPULAB_DEVICES")),
            help="device count (default: found with npu-smi / nvidia-smi; 1 for the CPU)",
        )
        parser.add_argument(
            "--labels", default=env.get("NPULAB_LABELS", ""), help="comma-separated host labels"
        )
        parser.add_argument(
            "--heartbeat-s", type=float, default=float(env.get("NPULAB_WORKER_HEARTBEAT_S", "10"))
        )
        parser.add_argument(
            "--telemetry-s",
            type=float,
            default=_float(env, "NPULAB_TELEMETRY_S", DEFAULT_INTERVAL_S),
            help="seconds between device telemetry samples; 0 turns telemetry off "
            f"(default {DEFAULT_INTERVAL_S:g})",
        )
        parser.add_argument(
            "--telemetry-send-s",
            type=float,
            default=_float(env, "NPULAB_TELEMETRY_SEND_S", DEFAULT_SEND_S),
            help="seconds between sends of the samples taken meanwhile, and at once when a "
            f"device's health changes; 0 sends every round (default {DEFAULT_SEND_S:g})",
        )
        parser.add_argument(
            "--run-env-allow",
            default=env.get("NPULAB_RUN_ENV_ALLOW", ",".join(DEFAULT_ALLOW)),
            help="the worker's environment variables a run inherits: names, or prefixes "
            "ending in * (default: deploy/worker-hosts.md)",
        )
        parser.add_argument(
            "--run-user",
            default=env.get("NPULAB_RUN_USER", "auto"),
            help="who runs execute as when the worker is root: 'auto' (the default) a user of "
            "the run-user pool (npulab-run-0 and up, made by python -m workers.host.runuser) "
            "for each run while it lives; or one named unprivileged user for every run "
            "(weaker: runs at once can read each other's). With its groups (e.g. HwHiAiUser). "
            "A worker that is not root runs runs as itself; a root one never as root",
        )
        parser.add_argument(
            "--sandbox",
            choices=("auto", "on", "off"),
            default=env.get("NPULAB_SANDBOX", "auto"),
            help="run each run in a bubblewrap filesystem sandbox: 'auto' (the default) where "
            "bwrap works, 'on' refuses to start without one",
        )
        parser.add_argument(
            "--sandbox-read",
            default=env.get("NPULAB_SANDBOX_READ", ""),
            help="comma-separated host folders every run may read in its sandbox (datasets)",
        )
        parser.add_argument(
            "--run-network",
            choices=RUN_NETWORKS,
            default=env.get("NPULAB_RUN_NETWORK", RUN_NETWORK_HOST),
            help="'host' (the default): a run reaches what this host reaches; 'none': each run "
            "has a loopback of its own and nothing else, so no service on or beside the host "
            "(the database, the broker) is in reach; needs the sandbox, and the host then takes "
            "no run across hosts",
        )
        parser.add_argument(
            "--advertise-address",
            default=env.get("NPULAB_ADVERTISE_ADDRESS", ""),
            help="the address other hosts reach this one at: MASTER_ADDR when it holds rank 0 "
            "of a run across hosts, its server_id in a rank table",
        )
        parser.add_argument(
            "--hccl-if-ip",
            default=env.get("NPULAB_HCCL_IF_IP", ""),
            help="HCCL_IF_IP for runs across hosts (the host NIC HCCL opens its sockets on)",
        )
        parser.add_argument(
            "--hccl-socket-ifname",
            default=env.get("NPULAB_HCCL_SOCKET_IFNAME", ""),
            help="HCCL_SOCKET_IFNAME for runs across hosts (instead of --hccl-if-ip)",
        )
        parser.add_argument(
            "--hccl-connect-timeout",
            type=int,
            default=_int_or_none(env.get("NPULAB_HCCL_CONNECT_TIMEOUT")),
            help="HCCL_CONNECT_TIMEOUT in seconds, 120-7200 (default 600)",
        )
        parser.add_argument("--log-level", default=env.get("NPULAB_LOG_LEVEL", "INFO"))
        args = parser.parse_args(argv)

        token = env.get("NPULAB_HOST_TOKEN", "")
        if args.token_file:
            try:
                with open(args.token_file, encoding="utf-8") as handle:
                    token = handle.read().strip()
            except OSError as exc:
                parser.error(f"cannot read --token-file {args.token_file}: {exc.strerror}")
        if not token:
            parser.error("no host token: set NPULAB_HOST_TOKEN or --token-file")
        if not args.broker_url:
            parser.error("no broker: set NPULAB_BROKER_URL or --broker-url")
        if args.run_network not in RUN_NETWORKS:  # NPULAB_RUN_NETWORK: argparse checks flags only
            parser.error(f"--run-network must be one of {', '.join(RUN_NETWORKS)}")
        if args.devices is not None and args.devices < 1:
            parser.error("--devices must be at least 1")
        low, high = HCCL_CONNECT_TIMEOUT_RANGE
        if args.hccl_connect_timeout is not None and not low <= args.hccl_connect_timeout <= high:
            parser.error(f"--hccl-connect-timeout must be from {low} to {high} seconds")
        if not args.telemetry_s >= 0 or args.telemetry_s == float("inf"):
            parser.error("--telemetry-s must be 0 (off) or a positive number of seconds")
        if not args.telemetry_send_s >= 0 or args.telemetry_send_s == float("inf"):
            parser.error("--telemetry-send-s must be 0 (every round) or a number of seconds")
        return cls(
            url=args.url,
            token=token,
            broker_url=args.broker_url,
            work_dir=os.path.abspath(args.work_dir),
            python=args.python,
            device_type=args.device_type,
            devices=args.devices,
            labels=[label.strip() for label in args.labels.split(",") if label.strip()],
            heartbeat_s=args.heartbeat_s,
            log_level=args.log_level.upper(),
            telemetry_s=args.telemetry_s,
            telemetry_send_s=args.telemetry_send_s,
            run_env_allow=parse_allow(args.run_env_allow),
            run_user=args.run_user or None,
            # Each network key is its option's name (--advertise-address, --hccl-if-ip, ...).
            network={key: getattr(args, key) for key in NETWORK_KEYS if getattr(args, key)},
            sandbox=args.sandbox,
            sandbox_read=parse_allow(args.sandbox_read),
            token_file=os.path.abspath(args.token_file) if args.token_file else "",
            mindspore_python=args.mindspore_python,
        )


def _int_or_none(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"NPULAB_DEVICES must be an integer, got {value!r}") from None


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    value = env.get(name, "")
    if value == "":
        return default
    try:
        return float(value)
    except ValueError:
        raise SystemExit(f"{name} must be a number of seconds, got {value!r}") from None
