"""Runs execute as a run user: they cannot read the worker's token or the platform's files.

One named user here (``--run-user NAME``); the pool is tests/workers/host/test_run_user_pool.py.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.workers.host.fakes import FakePlatform, host_config, revoke_traverse
from tests.workers.host.test_execution import ATTEMPT, training_claim
from workers.host.agent import HostAgent
from workers.host.runuser import (
    RunUser,
    RunUserError,
    SharedRunUser,
    choose,
    grant_traverse,
)

# An interpreter outside /root, which the run user cannot enter.
SYSTEM_PYTHON = "/usr/bin/python3"
PACKAGE_ROOT = Path(__file__).resolve().parents[3]


pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists(SYSTEM_PYTHON),
    reason="changing to another user needs root and a system interpreter",
)


@pytest.fixture(autouse=True)
def checkout_reachable() -> Iterator[None]:
    """Let nobody through the folders above this checkout for the test's length: a clone
    in a ``mktemp -d`` folder (mode 700) is root's alone, and the runner is imported from it."""
    changed = grant_traverse("nobody", [str(PACKAGE_ROOT / "workers")])
    yield
    revoke_traverse("nobody", changed)


PROBE = """
import os
print(f"uid {os.getuid()} home {os.environ['HOME']}", flush=True)
try:
    open(os.environ["SECRET"]).read()
    print("read the secret", flush=True)
except PermissionError:
    print("secret refused", flush=True)
open(os.path.join(os.environ["HOME"], "cache.txt"), "w").write("a run's own file")
"""


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A folder the run user can reach (pytest's own tmp folders are the root user's only)."""
    folder = Path(tempfile.mkdtemp(prefix="npulab-run-user-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_run_executes_as_the_run_user_and_cannot_read_the_workers_secrets(
    reachable: Path, monkeypatch
) -> None:
    secret = reachable / "host.token"
    secret.write_text("nph_the-worker-only")
    secret.chmod(stat.S_IRUSR | stat.S_IWUSR)
    work_dir = reachable / "work"
    work_dir.mkdir()
    nobody = RunUser("nobody")
    platform = FakePlatform()
    agent = HostAgent(host_config(work_dir, python=SYSTEM_PYTHON), platform, nobody)
    platform.claims[1] = training_claim(reachable, PROBE, env={"SECRET": str(secret)})

    agent.execute(1, ATTEMPT)

    lines = [e["line"] for e in platform.stored_events(1) if e.get("stream") == "stdout"]
    home = work_dir / "runs" / "1" / "home"
    assert f"uid {nobody.uid} home {home}" in lines
    assert "secret refused" in lines
    assert "read the secret" not in lines
    assert platform.stored_events(1)[-1]["status"] == "succeeded"
    assert (home / "cache.txt").read_text() == "a run's own file"
    # Ended: the run's folder is the worker's again, closed to every other user (the
    # next run of the same user included).
    for path in (home / "cache.txt", work_dir / "runs" / "1" / "attempt-1" / "events.jsonl"):
        assert path.stat().st_uid == os.geteuid()
    assert stat.S_IMODE((work_dir / "runs" / "1").stat().st_mode) == 0o700


def test_a_run_user_that_cannot_reach_the_interpreter_or_the_work_dir_is_refused(
    reachable: Path,
) -> None:
    # An interpreter in a folder only root may enter, as a venv under /root is.
    private = reachable / "private"
    private.mkdir(mode=0o700)
    (private / "python3").symlink_to(SYSTEM_PYTHON)
    nobody = RunUser("nobody")
    with pytest.raises(RunUserError, match=r"run user 'nobody' cannot start .*Permission denied"):
        nobody.check_can_run(str(private / "python3"), str(reachable))
    with pytest.raises(RunUserError, match=r"work directory .*PermissionError"):
        nobody.check_can_run(SYSTEM_PYTHON, str(private / "work"))
    nobody.check_can_run(SYSTEM_PYTHON, str(reachable))


def test_an_unknown_run_user_is_a_clear_error() -> None:
    with pytest.raises(RunUserError, match="run user 'no-such-user' does not exist"):
        RunUser("no-such-user")


def test_a_named_run_user_is_one_user_for_every_run_and_never_root() -> None:
    found = choose("nobody")
    assert isinstance(found, SharedRunUser)
    assert [user.name for user in found.users] == ["nobody"]
    assert not found.exclusive
    # Before: a root worker with no run user (or one that could not reach the
    # interpreter) warned and ran its runs as root.
    with pytest.raises(RunUserError, match="runs never execute as root"):
        choose("")
    with pytest.raises(RunUserError, match="runs never execute as root"):
        choose("root")
