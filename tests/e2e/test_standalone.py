"""`make run`'s command: the whole platform in one foreground process, stopped by Ctrl-C."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from npulab.web import stack
from tests.e2e.platform import free_port
from tests.paths import REPO_DIR

pytestmark = pytest.mark.e2e


def test_standalone_runs_a_smoke_run_on_sqlite_and_embedded_redis(tmp_path: Path) -> None:
    port = free_port()
    env = stack.child_env(
        {
            "DJANGO_SETTINGS_MODULE": "npulab.settings",
            "NPULAB_VAR_DIR": str(tmp_path),
            "DATABASE_URL": f"sqlite:///{tmp_path / 'npulab.sqlite3'}",
            "NPULAB_ADMIN_PASSWORD": "standalone-admin-pw",
        }
    )
    env.pop("NPULAB_BROKER_URL")  # nothing configured: the embedded Redis starts
    process = subprocess.Popen(
        [sys.executable, str(REPO_DIR / "manage.py"), "standalone", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output: list[str] = []
    threading.Thread(target=lambda: output.extend(process.stdout), daemon=True).start()
    try:
        deadline = time.monotonic() + 120
        while "npulab is running" not in "".join(output):
            assert process.poll() is None, "".join(output)
            assert time.monotonic() < deadline, "".join(output)
            time.sleep(0.2)
        url = f"http://127.0.0.1:{port}"
        text = "".join(output)
        assert f"  open      {url}/" in text
        assert "  login     admin / the password in NPULAB_ADMIN_PASSWORD" in text
        assert f"redis+socket://{tmp_path / 'redis' / 'redis.sock'}" in text

        token = subprocess.run(
            [sys.executable, str(REPO_DIR / "manage.py"), "api_token", "admin"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        api = requests.Session()
        api.headers["Authorization"] = f"Token {token}"
        spec = {"kind": "smoke", "device_type": "cpu", "matmul_size": 128, "train_steps": 5}
        run = api.post(f"{url}/api/v1/runs/", json=spec, timeout=30).json()
        while run["status"] not in ("succeeded", "failed", "cancelled", "lost"):
            assert time.monotonic() < deadline + 120, "".join(output[-50:])
            time.sleep(0.3)
            run = api.get(f"{url}/api/v1/runs/{run['id']}/", timeout=30).json()
        assert run["status"] == "succeeded", "".join(output[-80:])
        assert run["host"] == "local"
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=90)
    assert code == 0, "".join(output[-40:])
    assert output[-1].strip() == "npulab stopped."
    assert not (tmp_path / "redis" / "redis.sock").exists()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
