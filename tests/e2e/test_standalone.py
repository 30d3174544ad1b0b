"""`make run`'s command: the whole platform in one foreground process, stopped by Ctrl-C."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.standalone import ENDED, Standalone
from tests.paths import REPO_DIR

pytestmark = pytest.mark.e2e

BROKER_CHECK = (
    "from npulab.celery import app\n"
    "with app.connection_for_write() as connection:\n"
    "    connection.ensure_connection(max_retries=1)\n"
    "print('broker reached')"
)


def test_standalone_runs_a_smoke_run_on_sqlite_and_embedded_redis(tmp_path: Path) -> None:
    platform = Standalone(tmp_path)
    try:
        platform.start()
        text = platform.text
        assert f"  open      {platform.url}/" in text
        assert "  login     admin / the password in NPULAB_ADMIN_PASSWORD" in text
        assert f"redis+socket://{tmp_path / 'redis' / 'redis.sock'}" in text
        # A manage.py command beside it (resummarise_profiles) reaches the same broker.
        reached = subprocess.run(
            [sys.executable, str(REPO_DIR / "manage.py"), "shell", "-c", BROKER_CHECK],
            env=platform.env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert reached.stdout.strip().endswith("broker reached"), reached.stderr[-2000:]
        run = platform.smoke_run()
        assert run["status"] == "succeeded", platform.text[-4000:]
        assert run["host"] == "local"
    finally:
        code = platform.stop()
    assert code == 0, platform.text[-4000:]
    assert platform.output[-1].strip() == "npulab stopped."
    assert not (tmp_path / "redis" / "redis.sock").exists()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", platform.port), timeout=1).close()


def test_standalone_with_two_hosts_runs_a_training_run_across_both(tmp_path: Path) -> None:
    """`make run HOSTS=2`: two local CPU host workers, each its own host, one gloo gang."""
    platform = Standalone(tmp_path, hosts=2)
    try:
        platform.start()
        hosts = f"{platform.url}/api/v1/hosts/"
        platform.wait_for(
            lambda: (
                {
                    host["name"]
                    for host in platform.api.get(hosts, timeout=30).json()["results"]
                    if host["status"] == "online"
                }
                == {"local", "local-2"}
            ),
            180,
            "both local hosts online",
        )
        spec = {
            "kind": "training",
            "device_type": "cpu",
            "entry": "builtin:cnn",
            "max_steps": 20,
            "hosts": 2,
        }
        run = platform.api.post(f"{platform.url}/api/v1/runs/", json=spec, timeout=30).json()
        url = f"{platform.url}/api/v1/runs/{run['id']}/"
        platform.wait_for(
            lambda: platform.api.get(url, timeout=30).json()["status"] in ENDED,
            600,
            "the run across both hosts to end",
        )
        run = platform.api.get(url, timeout=30).json()
        if run["status"] != "succeeded":
            reasons = [(a["host"], a["exit_cause"], a["exit_reason"]) for a in run["attempts"]]
            pytest.fail(f"{reasons}\n{run['placements']}\n{platform.text[-3000:]}")
        assert run["shape"] == "2 × 1 cpu"
        placements = run["placements"]
        assert sorted(p["host"] for p in placements) == ["local", "local-2"]
        assert [p["ranks"] for p in placements] == [[0, 0], [1, 1]]
        assert {p["state"] for p in placements} == {"succeeded"}
    finally:
        code = platform.stop()
    assert code == 0, platform.text[-4000:]
