"""`make run`'s command: the whole platform in one foreground process, stopped by Ctrl-C."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.e2e.standalone import Standalone

pytestmark = pytest.mark.e2e


def test_standalone_runs_a_smoke_run_on_sqlite_and_embedded_redis(tmp_path: Path) -> None:
    platform = Standalone(tmp_path)
    try:
        platform.start()
        text = platform.text
        assert f"  open      {platform.url}/" in text
        assert "  login     admin / the password in NPULAB_ADMIN_PASSWORD" in text
        assert f"redis+socket://{tmp_path / 'redis' / 'redis.sock'}" in text
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
