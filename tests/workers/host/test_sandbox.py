"""A hostile run reads nothing of the platform's: not as root, not as another user.

The layout is ``make run``'s: a checkout's ``var/`` with the SQLite database (an admin's
session in ``django_session``), the local host's token, the secret key and the host
worker's work directory with another run's ``events.jsonl``, all left readable by every
user (as an older ``make run`` left them), so only the sandbox stands in the way. The
script tries each file by name, by a walk of the file system and through ``/proc``, and
prints what it got in the forms log redaction did not catch (reversed, base64).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.workers.host.fakes import FakePlatform, revoke_traverse
from workers.host import runuser, sandbox
from workers.track import checkpoint

PACKAGE_ROOT = Path(__file__).resolve().parents[3]
UNPRIVILEGED = "nobody"

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="the sandbox needs bubblewrap (apt install bubblewrap)"
)

HOSTILE = r"""
import base64, glob, json, os, sqlite3, sys

targets = json.loads(os.environ["TARGETS"])


def show(name, data):
    # The forms redaction missed: reversed and base64, so the log carries the secret.
    print("READ", name, data[::-1], base64.b64encode(data.encode()).decode(), flush=True)


for name, path in sorted(targets.items()):
    try:
        if name == "database":
            rows = sqlite3.connect(f"file:{path}?mode=ro", uri=True).execute(
                "select session_key from django_session"
            ).fetchall()
            show(name, rows[0][0])
        else:
            with open(path) as handle:
                show(name, handle.read())
    except Exception as exc:
        print("DENIED", name, type(exc).__name__, flush=True)

# By walking: whatever is mounted, under any name (but this run's own folder).
own = os.path.dirname(os.environ["NPULAB_RUN_DIR"]) + "/"
found = []
for top in ("/", os.environ.get("HOME", "/")):
    for root, dirs, files in os.walk(top):
        skip = ("/proc", "/sys", "/dev", "/usr")
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in skip]
        for name in files:
            wanted = ("local-host.token", "secret_key", "npulab.sqlite3", "events.jsonl")
            if name in wanted and not os.path.join(root, name).startswith(own):
                found.append(os.path.join(root, name))
for path in found:
    try:
        with open(path) as handle:
            show("walk:" + path, handle.read())
    except Exception as exc:
        print("DENIED walk:" + path, type(exc).__name__, flush=True)

# Through other processes: their working directories and open files.
for link in glob.glob("/proc/[0-9]*/cwd") + glob.glob("/proc/[0-9]*/root"):
    names = ("local-host.token", "secret_key", "npulab.sqlite3", "runs/7/attempt-1/events.jsonl")
    for name in names:
        try:
            with open(os.path.join(link, name), errors="replace") as handle:
                show("proc:" + link + "/" + name, handle.read())
        except Exception:
            pass
print("HOSTILE DONE", flush=True)
"""

# A run kept off the network reaches no service of the host's (a listener on the host's
# 127.0.0.1 stands for the database and the broker), but its own supervisor's MLflow API.
NETWORK_PROBE = r"""
import json, os, socket, urllib.request

try:
    socket.create_connection(("127.0.0.1", int(os.environ["LISTENER_PORT"])), 10).close()
    print("REACHED the host's listener", flush=True)
except OSError as exc:
    print("DENIED the host's listener", type(exc).__name__, flush=True)
body = {"run_id": os.environ["MLFLOW_RUN_ID"], "key": "probe", "value": 1.0, "timestamp": 0}
request = urllib.request.Request(
    os.environ["MLFLOW_TRACKING_URI"] + "/api/2.0/mlflow/runs/log-metric",
    data=json.dumps(body).encode(),
    headers={
        "Content-Type": "application/json",
        "Authorization": "Bearer " + os.environ["MLFLOW_TRACKING_TOKEN"],
    },
)
urllib.request.urlopen(request, timeout=30).read()
print("MLFLOW answered", flush=True)
"""


# Links in place of the files the worker, as root, reads and writes in the run's folder:
# the spool to a file only root may read, the offset files and the log to one it must not
# write. The lines printed after the swap still reach the platform.
LINKS = r"""
import json, os

targets = json.loads(os.environ["TARGETS"])
run_dir = os.environ["NPULAB_RUN_DIR"]
print("before the swap", flush=True)
os.rename(os.path.join(run_dir, "events.jsonl"), os.path.join(run_dir, "aside.jsonl"))
os.symlink(targets["root_only"], os.path.join(run_dir, "events.jsonl"))
for name in ("forwarded.offset", "forwarded.offset.tmp", "supervisor.log", "supervisor.pid"):
    path = os.path.join(run_dir, name)
    if os.path.lexists(path):
        os.unlink(path)
    os.symlink(targets["victim"], path)
# Its checkpoint of step 99 is another run's, closed to this run's user, and announced.
from workers.events import EventWriter
from workers.track import checkpoint
step = os.path.join(os.environ["NPULAB_CHECKPOINT_DIR"], checkpoint.step_dir_name(99))
os.symlink(targets["other_checkpoint"], step)
spool = EventWriter(os.path.join(run_dir, "aside.jsonl"))
spool.emit("checkpoint", step=99, path=step, bytes=targets["other_bytes"], sha256="0" * 64)
spool.close()
print("after the swap", flush=True)
"""


def make_layout(top: Path) -> dict[str, Any]:
    """``var/`` as ``make run`` leaves it, every file readable by every user."""
    var = top / "checkout" / "var"
    other_run = var / "worker" / "runs" / "7" / "attempt-1"
    other_run.mkdir(parents=True)
    secrets_by_name = {
        "database": "sess-" + secrets.token_hex(16),
        "host_token": "nph_" + secrets.token_hex(20),
        "secret_key": "key-" + secrets.token_hex(20),
        "other_run": "other-run-" + secrets.token_hex(8),
    }
    database = var / "npulab.sqlite3"
    with sqlite3.connect(database) as connection:
        connection.execute("create table django_session (session_key text, session_data text)")
        connection.execute(
            "insert into django_session values (?, 'admin')", (secrets_by_name["database"],)
        )
    (var / "local-host.token").write_text(secrets_by_name["host_token"])
    (var / "secret_key").write_text(secrets_by_name["secret_key"])
    (other_run / "events.jsonl").write_text(
        json.dumps({"type": "log", "line": secrets_by_name["other_run"]}) + "\n"
    )
    job = top / "job"
    job.mkdir()
    (job / "hostile.py").write_text(HOSTILE)
    (job / "network.py").write_text(NETWORK_PROBE)
    (job / "links.py").write_text(LINKS)
    targets = {
        "database": str(database),
        "host_token": str(var / "local-host.token"),
        "secret_key": str(var / "secret_key"),
        "other_run": str(other_run / "events.jsonl"),
    }
    for path in [top, *top.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return {"top": str(top), "targets": targets, "secrets": secrets_by_name}


def drive(
    layout: dict[str, Any],
    script: str = "hostile.py",
    platform: FakePlatform | None = None,
    **config: Any,
) -> list[dict[str, Any]]:
    """The host worker's part: confine as the worker would, execute the run, its events."""
    from tests.workers.host.fakes import host_config
    from workers.host.agent import HostAgent
    from workers.host.main import confine

    var = Path(layout["targets"]["host_token"]).parent
    host = host_config(
        var / "worker",
        token_file=layout["targets"]["host_token"],
        sandbox=sandbox.ON,
        run_user=runuser.AUTO,
        **config,
    )

    run_users, run_sandbox = confine(host)
    assert run_sandbox is not None
    platform = platform or FakePlatform()
    platform.claims[1] = {
        "spec": {
            "kind": "training",
            "device_type": "cpu",
            "entry": str(Path(layout["top"]) / "job" / script),
            "timeout_s": 120,
            "env": {"TARGETS": json.dumps(layout["targets"]), **layout.get("env", {})},
        },
        "devices": [0],
        "resume": None,
    }
    HostAgent(host, platform, run_users, run_sandbox).execute(1, 1)
    log = var / "worker" / "runs" / "1" / "attempt-1" / "supervisor.log"
    events = platform.stored_events(1)
    if log.exists():  # what the supervisor said, for a failure's message
        events.append({"type": "supervisor", "line": log.read_text()[-3000:]})
    return events


def assert_nothing_read(events: list[dict[str, Any]], layout: dict[str, Any]) -> None:
    lines = [str(event.get("line", "")) for event in events]
    text = json.dumps(events)
    assert "HOSTILE DONE" in lines, lines[-5:]
    for name in layout["targets"]:
        assert any(line.startswith(f"DENIED {name} ") for line in lines), (name, lines)
    assert not [line for line in lines if line.startswith("READ")], lines
    for value in layout["secrets"].values():
        for form in (value, value[::-1], base64.b64encode(value.encode()).decode()):
            assert form not in text
    assert [event for event in events if event["type"] == "result"][-1]["status"] == "succeeded"


@pytest.fixture
def top() -> Iterator[Path]:
    # Outside pytest's tmp folders, which are the test user's only.
    folder = Path(tempfile.mkdtemp(prefix="npulab-sandbox-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="the root layout needs root")
def test_a_hostile_run_of_a_root_worker_reads_nothing_of_the_platforms(top: Path) -> None:
    layout = make_layout(top)
    # Another run's files are the run user's own (a run user that did not take them back,
    # as a single user while both runs live): only the sandbox keeps them apart.
    run_user = runuser.ensure_pool(1)[0]
    assert run_user.uid != 0
    runs = Path(layout["targets"]["other_run"]).parents[2]
    run_user.give([str(runs)])
    for path in [runs, *runs.rglob("*")]:  # and every user's to read, as in make_layout
        path.chmod(0o755 if path.is_dir() else 0o644)
    events = drive(layout)
    assert_nothing_read(events, layout)


@pytest.mark.skipif(os.geteuid() != 0, reason="the root layout needs root")
@pytest.mark.parametrize("run_network", ["none", "host"])
def test_a_run_kept_off_the_network_reaches_only_its_own_loopback(
    top: Path, run_network: str
) -> None:
    layout = make_layout(top)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        layout["env"] = {"LISTENER_PORT": str(listener.getsockname()[1])}
        events = drive(layout, "network.py", network={"run_network": run_network})
    lines = [str(event.get("line", "")) for event in events]
    reached = "REACHED the host's listener" in lines
    assert reached == (run_network == "host"), lines
    assert any(line.startswith("DENIED the host's listener") for line in lines) != reached
    assert "MLFLOW answered" in lines, lines
    metrics = [event for event in events if event["type"] == "metric"]
    assert [(event["key"], event["value"]) for event in metrics] == [("probe", 1.0)]


@pytest.mark.skipif(os.geteuid() != 0, reason="the root layout needs root")
def test_links_a_run_puts_in_its_folder_neither_show_nor_change_root_only_files(
    top: Path,
) -> None:
    layout = make_layout(top)
    secret = "root-only-" + secrets.token_hex(8)
    root_only, victim = top / "root-only", top / "victim"
    root_only.write_text("".join(f"{secret} {n}\n" for n in range(2000)))
    root_only.chmod(0o600)
    victim.write_text("untouched")
    victim.chmod(0o644)
    other = top / "checkout" / "var" / "worker" / "runs" / "7" / "checkpoints"
    weights = ("other-weights-" + secrets.token_hex(8)).encode()
    folder = other / checkpoint.step_dir_name(99)
    folder.mkdir(parents=True)
    (folder / checkpoint.STATE_FILE).write_bytes(weights)
    digest = hashlib.sha256(weights).hexdigest()
    files = {checkpoint.STATE_FILE: {"bytes": len(weights), "sha256": digest}}
    (folder / checkpoint.MANIFEST_FILE).write_text(json.dumps({"step": 99, "files": files}))
    other.chmod(0o700)
    layout["targets"].update(
        root_only=str(root_only),
        victim=str(victim),
        other_checkpoint=str(folder),
        other_bytes=len(weights),
    )
    platform = FakePlatform()

    events = drive(layout, "links.py", platform)

    lines = [str(event.get("line", "")) for event in events if event["type"] != "supervisor"]
    assert "before the swap" in lines, lines[-5:]
    assert "after the swap" in lines, lines[-5:]
    assert secret not in json.dumps(events)
    assert victim.read_text() == "untouched"
    assert not [u for u in platform.artifacts.values() if weights in u["data"]]
    assert sorted(path.name for path in folder.iterdir()) == ["manifest.json", "state.pt"]
    assert [event for event in events if event["type"] == "result"][-1]["status"] == "succeeded"


@pytest.fixture
def unprivileged_worker(top: Path) -> Iterator[list[str]]:
    """How to start a process as a worker that is not root: as this user when it is not
    root; as root, as nobody, let through the folders above the interpreter and this
    checkout (a ``mktemp -d`` clone, a venv under /root) for the test's length."""
    if os.geteuid() != 0:
        yield []
        return
    user = runuser.RunUser(UNPRIVILEGED)
    changed = runuser.grant_traverse(UNPRIVILEGED, [sys.executable, str(PACKAGE_ROOT)])
    changed += runuser.grant_traverse(UNPRIVILEGED, [os.path.realpath(sys.executable)])
    for path in [top, *top.rglob("*")]:
        os.lchown(path, user.uid, user.gid)
    try:
        yield [
            shutil.which("setpriv") or "setpriv",
            f"--reuid={user.uid}",
            f"--regid={user.gid}",
            "--clear-groups",
            "--",
        ]
    finally:
        revoke_traverse(UNPRIVILEGED, changed)


def test_a_hostile_run_of_a_worker_that_is_not_root_reads_nothing_of_the_platforms(
    top: Path, unprivileged_worker: list[str]
) -> None:
    layout = make_layout(top)
    if unprivileged_worker:
        user = runuser.RunUser(UNPRIVILEGED)
        for path in [top, *top.rglob("*")]:
            os.lchown(path, user.uid, user.gid)
    code = (
        "import json, sys; from tests.workers.host.test_sandbox import drive; "
        "print(json.dumps(drive(json.loads(sys.argv[1]))))"
    )
    result = subprocess.run(
        [*unprivileged_worker, sys.executable, "-c", code, json.dumps(layout)],
        cwd=str(PACKAGE_ROOT),
        env={**os.environ, "PYTHONPATH": str(PACKAGE_ROOT), "HOME": layout["top"]},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    events = json.loads(result.stdout.strip().splitlines()[-1])
    assert_nothing_read(events, layout)


def test_a_run_user_in_the_sandbox_can_take_a_multiprocessing_lock() -> None:
    """A semaphore lives in /dev/shm: without a writable one, importing msprobe (or a
    DataLoader with workers) fails with PermissionError."""
    if os.geteuid() != 0:
        pytest.skip("dropping to a run user needs root")
    # Under a lease, as a worker's run: a stack on this machine may use the pool.
    lease = runuser.RunUserPool(runuser.ensure_pool(1)).lease()
    box = sandbox.Sandbox(
        shutil.which("bwrap") or "bwrap", [], setpriv=shutil.which("setpriv") or ""
    )
    code = "import multiprocessing; multiprocessing.Lock(); print('locked')"
    argv = box.argv([sys.executable, "-c", code], sys.executable, (), run_user=lease.user, cwd="/")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    finally:
        lease.end([])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "locked"
