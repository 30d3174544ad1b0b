"""A run's environment: the allow-list, the spec's env and the run's own variables, no more."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.workers.host.fakes import FakePlatform
from tests.workers.host.test_execution import ATTEMPT, training_claim
from workers.contract import script_env
from workers.contract.kinds import EXTRA_KINDS_ENV
from workers.host.agent import HostAgent
from workers.host.runenv import DEFAULT_ALLOW, RUNNER_SETTINGS, clean_env, parse_allow

# Prints the names and a few values of its environment as one JSON line.
SHOW_ENV = """
import json, os
print("ENV " + json.dumps(dict(os.environ)), flush=True)
"""

WORKER_SECRETS = {
    "DATABASE_URL": "postgres://npulab:pw-db@db/npulab",
    "NPULAB_SECRET_KEY_FILE": "/etc/npulab/secret_key",
    "NPULAB_HOST_TOKEN": "nph_not-for-runs",
    "NPULAB_HOST_TOKEN_FILE": "/etc/npulab/host.token",
    "NPULAB_BROKER_URL": "redis://:pw-redis@broker:6379/0",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI",
}


def run_environment(agent: HostAgent, platform: FakePlatform, tmp_path: Path, **spec) -> dict:
    platform.claims[1] = training_claim(tmp_path, SHOW_ENV, **spec)
    agent.execute(1, ATTEMPT)
    [line] = [
        event["line"]
        for event in platform.stored_events(1)
        if event.get("stream") == "stdout" and event["line"].startswith("ENV ")
    ]
    return json.loads(line[4:])


def test_a_run_never_sees_the_workers_credentials_or_settings(
    agent: HostAgent, platform: FakePlatform, tmp_path: Path, monkeypatch
) -> None:
    for name, value in WORKER_SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ASCEND_OPP_PATH", "/usr/local/Ascend/ascend-toolkit/latest/opp")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/local/Ascend/driver/lib64")
    monkeypatch.setenv(EXTRA_KINDS_ENV, "tests.kinds.echo")

    env = run_environment(agent, platform, tmp_path, env={"HCCL_CONNECT_TIMEOUT": "600"})

    assert not set(WORKER_SECRETS) & set(env)
    assert not any(value in json.dumps(env) for value in WORKER_SECRETS.values())
    # What the toolkits and devices need does pass, and the spec's own env.
    assert env["ASCEND_OPP_PATH"] == "/usr/local/Ascend/ascend-toolkit/latest/opp"
    assert env["LD_LIBRARY_PATH"].startswith("/usr/local/Ascend/driver/lib64")
    assert env["HCCL_CONNECT_TIMEOUT"] == "600"
    assert env[EXTRA_KINDS_ENV] == "tests.kinds.echo"
    assert env[script_env.RUN_ID] == "1"
    assert env["PATH"]


def test_the_allow_list_is_the_workers_setting(
    agent: HostAgent, platform: FakePlatform, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("https_proxy", "http://mirror.local:3128")
    monkeypatch.setenv("ASCEND_OPP_PATH", "/opp")
    agent.config.run_env_allow = parse_allow("PATH, https_proxy")

    env = run_environment(agent, platform, tmp_path)

    assert env["https_proxy"] == "http://mirror.local:3128"
    assert "ASCEND_OPP_PATH" not in env


@pytest.mark.parametrize(
    ("name", "passes"),
    [
        ("LC_ALL", True),
        ("ASCEND_RT_VISIBLE_DEVICES", True),
        ("CONDA_PREFIX", True),
        ("HOSTNAME_SECRET", False),
        ("PGPASSWORD", False),
        # A pattern never lets the worker's own settings through.
        ("NPULAB_URL", False),
    ],
)
def test_names_and_prefixes(name: str, passes: bool) -> None:
    allow = [*DEFAULT_ALLOW, "NPULAB_*"]
    assert (name in clean_env({name: "x"}, allow)) is passes


def test_the_runner_settings_pass_whatever_the_list() -> None:
    environ = dict.fromkeys(RUNNER_SETTINGS, "1")
    assert clean_env(environ, []) == environ
