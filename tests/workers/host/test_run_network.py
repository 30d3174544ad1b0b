"""Keeping runs off the network: the host's setting, what it needs, and the broker warning.

The run itself, reaching its own MLflow API and nothing of the host's, is in
test_sandbox.py.
"""

from __future__ import annotations

import os
import shutil
from unittest import mock

import pytest

from workers.host import sandbox
from workers.host.config import HostConfig
from workers.host.main import open_broker


def config(*argv: str, **env: str) -> HostConfig:
    with mock.patch.dict(os.environ, {"NPULAB_HOST_TOKEN": "t", **env}):
        return HostConfig.from_args(["--broker-url", "redis://:pw@127.0.0.1:6379/7", *argv])


def test_runs_reach_the_hosts_network_unless_the_operator_says_none() -> None:
    assert not config().own_network
    assert config().network["run_network"] == "host"  # reported: the platform places by it
    kept = config(NPULAB_RUN_NETWORK="none")
    assert kept.own_network
    assert kept.network["run_network"] == "none"
    assert config("--run-network", "none").own_network


def test_an_unknown_setting_is_refused_naming_the_option(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        config(NPULAB_RUN_NETWORK="off")
    assert exited.value.code == 2
    assert "--run-network must be one of host, none" in capsys.readouterr().err


def test_keeping_runs_off_the_network_needs_the_sandbox() -> None:
    with pytest.raises(sandbox.SandboxError, match="--run-network none needs the sandbox"):
        sandbox.resolve(sandbox.OFF, "python3", "/work", [], None, own_network=True)
    with mock.patch.object(shutil, "which", return_value=None):
        # auto would go on without bubblewrap; a host that promised no network may not.
        missing = r"needs the sandbox: bubblewrap \(bwrap\) is not installed"
        with pytest.raises(sandbox.SandboxError, match=missing):
            sandbox.resolve(sandbox.AUTO, "python3", "/work", [], None, own_network=True)
        assert sandbox.resolve(sandbox.AUTO, "python3", "/work", [], None) is None


def test_the_sandbox_gives_a_run_its_own_network_only_when_asked() -> None:
    kept = sandbox.Sandbox("/usr/bin/bwrap", ["/work"], own_network=True)
    assert "--unshare-net" in kept.argv(["python3"], "python3", writable=())
    shared = sandbox.Sandbox("/usr/bin/bwrap", ["/work"])
    assert "--unshare-net" not in shared.argv(["python3"], "python3", writable=())


@pytest.mark.parametrize(
    ("url", "exposed"),
    [
        ("redis://npulab.example.org:6379/0", "npulab.example.org:6379"),
        ("redis://127.0.0.1/0", "127.0.0.1"),
        ("amqp://rabbit.example.org//", "rabbit.example.org"),
        ("redis://:s3cret@npulab.example.org:6379/0", ""),
        ("rediss://npulab:s3cret@npulab.example.org:6380/0", ""),
        ("redis+socket:///var/lib/npulab/redis.sock", ""),
        ("memory://", ""),
        ("redis://host:notaport/0", ""),
    ],
)
def test_a_broker_without_a_password_is_named(url: str, exposed: str) -> None:
    assert open_broker(url) == exposed
