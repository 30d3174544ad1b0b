"""Each run that lives executes as a user of its own: a hostile run reads nothing of another.

A root host worker with two device slots executes two hostile runs at once, after an
earlier run on the same host has finished. Each tries to read the other's run directory
and home, the earlier run's, and the other's processes through ``/proc/<pid>/cwd`` and
``/proc/<pid>/environ``; every read fails. Without the pool (one run user for every run,
no sandbox: this machine and CI have no bubblewrap) each of those reads succeeded.

The tests' pool is their own (``npulab-test-run-<i>``), so that they never lease, nor
kill the processes of, a user a stack running on the same machine has leased.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import alive, wait_until
from tests.workers.host.fakes import FakePlatform, host_config
from tests.workers.host.test_execution import ATTEMPT, training_claim
from workers.host import agent as agent_module
from workers.host import runuser
from workers.host.agent import SUPERVISOR_PID, HostAgent
from workers.host.config import HostConfig
from workers.host.main import confine
from workers.host.runuser import RunUser, RunUserError, RunUserPool

SYSTEM_PYTHON = "/usr/bin/python3"
PACKAGE_ROOT = Path(__file__).resolve().parents[3]
TEST_POOL = ("npulab-test-run-0", "npulab-test-run-1")
# Processes started by the tests: slow on a loaded 2-core machine.
DEADLINE_S = 120.0

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists(SYSTEM_PYTHON),
    reason="changing to other users needs root and a system interpreter",
)


@pytest.fixture(scope="module")
def pool_users() -> list[RunUser]:
    """The tests' pool, made if missing and let through to this checkout (a clone in a
    ``mktemp -d`` folder or under /root is root's alone, and the runner is imported from
    it). The entries stay: search only, for users no one else runs as."""
    users = [runuser.ensure_user(name) for name in TEST_POOL]
    for user in users:
        runuser.grant_traverse(user.name, [str(PACKAGE_ROOT / "workers")])
    return users


@pytest.fixture
def top() -> Iterator[Path]:
    """A folder every run user may reach (pytest's own tmp folders are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="npulab-pool-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def pool(pool_users: list[RunUser], top: Path) -> Iterator[RunUserPool]:
    made = RunUserPool(pool_users, lease_dir=str(top / "leases"))
    yield made
    for user in pool_users:  # a failed test leaves no process of its users behind
        runuser.kill_processes_of(user)


def sleeper(user: RunUser) -> subprocess.Popen:
    """A process of ``user``'s in a session of its own: what a run that escaped its
    process groups (``setsid``, a daemon) leaves."""
    return subprocess.Popen(
        ["sleep", "600"], preexec_fn=user.become(), start_new_session=True, cwd="/"
    )


# -- leases --------------------------------------------------------------------------------


def test_a_user_is_not_leased_again_while_its_run_lives_and_is_after(
    pool: RunUserPool, top: Path
) -> None:
    first = pool.try_lease()
    second = pool.try_lease()
    assert first is not None
    assert second is not None
    assert first.user.uid != second.user.uid
    assert pool.try_lease() is None
    # A restarted worker, or another one on the machine, shares the leases: they are
    # the kernel's locks, not this object's memory.
    restarted = RunUserPool(pool.users, lease_dir=pool.lease_dir)
    assert restarted.try_lease() is None
    first.end([])
    again = restarted.try_lease()
    assert again is not None
    assert again.user.uid == first.user.uid
    second.end([])
    again.end([])


def test_a_user_with_a_live_process_is_not_leased_though_no_worker_holds_it(
    pool: RunUserPool,
) -> None:
    """A worker killed with SIGKILL drops its leases with it; its runs live on until its
    restart reaps them, and their users are not free meanwhile."""
    left = sleeper(pool.users[0])
    try:
        wait_until(lambda: runuser.processes_of(pool.users[0].uid), "the process to start")
        lease = pool.try_lease()
        assert lease is not None
        assert lease.user.uid == pool.users[1].uid
        assert pool.try_lease() is None
        lease.end([])
    finally:
        left.kill()
        left.wait()
    lease = pool.try_lease()
    assert lease is not None
    assert lease.user.uid == pool.users[0].uid
    lease.end([])


def test_the_end_of_a_lease_kills_what_the_run_left_and_takes_its_folder_back(
    pool: RunUserPool, top: Path
) -> None:
    lease = pool.try_lease()
    assert lease is not None
    folder = top / "runs" / "9"
    (folder / "attempt-1").mkdir(parents=True)
    (folder / "attempt-1" / "out.txt").write_text("the run's")
    (folder / "attempt-1" / "out.txt").chmod(0o644)
    lease.user.give([str(folder)])
    assert folder.stat().st_uid == lease.user.uid
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    left = sleeper(lease.user)
    wait_until(lambda: alive(left.pid), "the left-behind process to start")

    lease.end([str(folder)])

    assert left.wait(timeout=DEADLINE_S) == -9
    assert runuser.processes_of(lease.user.uid) == []
    for path in (folder, folder / "attempt-1", folder / "attempt-1" / "out.txt"):
        assert path.stat().st_uid == os.geteuid()
    for path in (folder, folder / "attempt-1"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_taking_a_folder_back_never_follows_a_link_the_run_made(pool: RunUserPool, top: Path):
    outside = top / "outside"
    outside.mkdir(mode=0o755)
    (outside / "file").write_text("not the run's")
    user = pool.users[0]
    os.chown(outside, user.uid, user.gid)
    os.chown(outside / "file", user.uid, user.gid)
    folder = top / "runs" / "4"
    folder.mkdir(parents=True)
    (folder / "dir-link").symlink_to(outside)
    (folder / "file-link").symlink_to(outside / "file")
    user.give([str(folder)])

    runuser.take_back([str(folder)])

    assert outside.stat().st_uid == user.uid
    assert (outside / "file").stat().st_uid == user.uid
    assert stat.S_IMODE(outside.stat().st_mode) == 0o755
    assert os.lstat(folder / "dir-link").st_uid == os.geteuid()


def test_a_restarted_worker_takes_back_what_its_runs_left_and_frees_their_users(
    pool: RunUserPool, top: Path
) -> None:
    user = pool.users[0]
    work = top / "work"
    left_run = work / "runs" / "5"
    (left_run / "attempt-1").mkdir(parents=True)
    user.give([str(left_run)])
    left = sleeper(user)
    wait_until(lambda: alive(left.pid), "the left-behind process to start")

    assert pool.recover(str(work)) == [str(left_run)]

    assert left.wait(timeout=DEADLINE_S) == -9
    assert left_run.stat().st_uid == os.geteuid()
    assert stat.S_IMODE(left_run.stat().st_mode) == 0o700
    lease = pool.try_lease()
    assert lease is not None
    assert lease.user.uid == user.uid
    lease.end([])


def test_a_lease_waits_for_a_free_user_and_gives_up_when_told(
    pool: RunUserPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = [pool.try_lease(), pool.try_lease()]
    give_up = threading.Event()
    give_up.set()
    with pytest.raises(RunUserError, match="the host worker is shutting down"):
        pool.lease(give_up)
    monkeypatch.setattr(runuser, "LEASE_WAIT_S", 0.0)
    with pytest.raises(RunUserError, match="no free run user: all 2 of the pool are in use"):
        pool.lease()
    freed = held.pop()
    assert freed is not None
    freed.end([])
    lease = pool.lease()
    assert lease.user.uid == freed.user.uid
    for other in [*held, lease]:
        assert other is not None
        other.end([])


def test_an_attempt_with_no_free_user_ends_saying_so_and_starts_nothing(
    pool: RunUserPool, top: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = [pool.try_lease(), pool.try_lease()]
    monkeypatch.setattr(runuser, "LEASE_WAIT_S", 0.0)
    platform = FakePlatform()
    work = top / "work"
    agent = HostAgent(host_config(work, python=SYSTEM_PYTHON), platform, pool)
    platform.claims[1] = training_claim(top, "print('ran')")

    agent.execute(1, ATTEMPT)

    [(_, _, report)] = platform.finished
    assert report["exit_code"] is None
    assert report["error"].startswith("no free run user")
    assert not (work / "runs" / "1" / "attempt-1" / "supervisor.log").exists()
    for lease in held:
        assert lease is not None
        lease.end([])


# -- start-up checks beside another worker -----------------------------------------------------
#
# Another host worker on the machine (make run HOSTS=2, deploy's several workers) shares
# the pool: the end of its lease, and its start-up finding a user free, kill every process
# of that user. A worker's start-up checks execute as pool users too: only under a lease.


def gated_python(top: Path) -> Path:
    """An interpreter that waits for ``go`` beside it before it starts: a probe that lives
    until the test lets it go. Each start notes its uid there (``started-<uid>``), where
    it may write (not in the sandbox, which mounts the folder read-only)."""
    gate = top / "gate"
    gate.mkdir()
    gate.chmod(0o777)
    python = gate / "python"
    python.write_text(
        "#!/bin/sh\n"
        f"touch {gate}/started-$(id -u) 2>/dev/null\n"
        f"while [ ! -e {gate}/go ]; do sleep 0.05; done\n"
        f'exec {SYSTEM_PYTHON} "$@"\n'
    )
    python.chmod(0o755)
    return python


def started(python: Path) -> set[int]:
    return {int(path.name.split("-")[1]) for path in python.parent.glob("started-*")}


def assert_free(pool: RunUserPool) -> None:
    """Every user of the pool can be leased: no lease held, no process left."""
    leases = [pool.try_lease() for _ in pool.users]
    assert None not in leases
    for lease in leases:
        assert lease is not None
        lease.end([])


def other_than(uid: int, pids: set[int]) -> list[int]:
    """The processes of ``uid`` but ``pids``."""
    return [pid for pid in runuser.processes_of(uid) if pid not in pids]


def test_a_check_lives_through_the_end_of_another_workers_lease_on_its_user(
    pool: RunUserPool, top: Path, caplog: pytest.LogCaptureFixture, monkeypatch
) -> None:
    """Another worker's run has the first user when this worker starts, and ends while
    this worker checks its users: that end kills every process of the user."""
    monkeypatch.setattr(runuser, "PROBE_WAIT_S", DEADLINE_S)
    caplog.set_level(logging.DEBUG, logger=runuser.__name__)
    python = gated_python(top)
    (top / "work").mkdir()
    other = RunUserPool(pool.users, lease_dir=pool.lease_dir)
    lease = other.try_lease()
    assert lease is not None
    user = lease.user
    its_run = sleeper(user)
    wait_until(lambda: alive(its_run.pid), "the other worker's run to start")

    with ThreadPoolExecutor(max_workers=1) as executor:
        checking = executor.submit(runuser.check_can_run, pool, str(python), str(top / "work"))
        wait_until(
            lambda: (
                other_than(user.uid, {its_run.pid})
                or f"run user {user.name} is in use: waiting" in caplog.text
            ),
            "the check to reach the other worker's user",
            DEADLINE_S,
        )
        lease.end([])
        assert its_run.wait(timeout=DEADLINE_S) == -9
        (python.parent / "go").touch()
        checking.result(timeout=DEADLINE_S)

    assert started(python) == {u.uid for u in pool.users}
    assert_free(pool)


def test_a_check_lives_through_another_workers_start_up_clearing_its_user(
    pool: RunUserPool, top: Path
) -> None:
    """Another worker starts while this one checks its users: it takes back the folder its
    earlier life left to the first user, and kills what it finds running as a free one."""
    python = gated_python(top)
    (top / "work").mkdir()
    user = pool.users[0]
    with ThreadPoolExecutor(max_workers=1) as executor:
        checking = executor.submit(runuser.check_can_run, pool, str(python), str(top / "work"))
        wait_until(
            lambda: all(runuser.processes_of(u.uid) for u in pool.users),
            "the checks of both users to start",
            DEADLINE_S,
        )
        other_work = top / "other-work"
        left_run = other_work / "runs" / "7"
        left_run.mkdir(parents=True)
        user.give([str(left_run)])
        other = RunUserPool(pool.users, lease_dir=pool.lease_dir)
        assert other.recover(str(other_work)) == [str(left_run)]
        (python.parent / "go").touch()
        checking.result(timeout=DEADLINE_S)

    assert started(python) == {u.uid for u in pool.users}
    assert left_run.stat().st_uid == os.geteuid()
    assert_free(pool)


def test_a_user_another_workers_run_keeps_is_not_checked_now_nor_waited_for(
    pool: RunUserPool, top: Path, caplog: pytest.LogCaptureFixture, monkeypatch
) -> None:
    monkeypatch.setattr(runuser, "PROBE_WAIT_S", 0.0)
    caplog.set_level(logging.INFO, logger=runuser.__name__)
    python = gated_python(top)
    (python.parent / "go").touch()
    (top / "work").mkdir()
    other = RunUserPool(pool.users, lease_dir=pool.lease_dir)
    lease = other.try_lease()
    assert lease is not None
    its_run = sleeper(lease.user)
    try:
        wait_until(lambda: alive(its_run.pid), "the other worker's run to start")

        runuser.check_can_run(pool, str(python), str(top / "work"))

        assert started(python) == {u.uid for u in pool.users} - {lease.user.uid}
        assert (
            f"run user {lease.user.name} not checked now: another worker's run on this host "
            "executes as it" in caplog.text
        )
        assert alive(its_run.pid)
    finally:
        lease.end([])
    assert its_run.wait(timeout=DEADLINE_S) == -9


def test_the_sandbox_check_lives_through_the_end_of_another_workers_lease(
    pool: RunUserPool, top: Path, monkeypatch
) -> None:
    """A sandbox check killed in ``auto`` would leave the worker's runs unconfined for its
    life: it runs as a user this worker leases for it, never one another worker's run has."""
    if shutil.which("bwrap") is None:
        pytest.skip("the sandbox needs bubblewrap (apt install bubblewrap)")
    python = gated_python(top)
    config: HostConfig = host_config(
        top / "work",
        python=str(python),
        sandbox="auto",
        run_user=runuser.AUTO,
        sandbox_read=[str(python.parent)],
    )
    (top / "work").mkdir()
    # This host's pool is the tests' own (the machine's may be a stack's).
    monkeypatch.setattr(runuser, "choose", lambda name, slots: pool)
    other = RunUserPool(pool.users, lease_dir=pool.lease_dir)
    lease = other.try_lease()
    assert lease is not None
    its_run = sleeper(lease.user)
    wait_until(lambda: alive(its_run.pid), "the other worker's run to start")

    with ThreadPoolExecutor(max_workers=1) as executor:
        confining = executor.submit(confine, config)
        wait_until(
            lambda: any(other_than(u.uid, {its_run.pid}) for u in pool.users),
            "the sandbox check to start",
            DEADLINE_S,
        )
        lease.end([])
        assert its_run.wait(timeout=DEADLINE_S) == -9
        (python.parent / "go").touch()
        run_users, run_sandbox = confining.result(timeout=DEADLINE_S)

    assert run_users is pool
    assert run_sandbox is not None
    assert_free(pool)  # the check's lease was given back


# -- choosing ---------------------------------------------------------------------------------


def test_auto_is_the_pool_with_a_user_for_every_slot_and_never_root() -> None:
    users = runuser.ensure_pool(2)
    found = runuser.choose(runuser.AUTO, slots=2)
    assert isinstance(found, RunUserPool)
    assert found.exclusive
    # Every pool user the host has, at least the two asked for.
    assert [user.name for user in found.users] == [user.name for user in users]
    assert [user.name for user in users[:2]] == ["npulab-run-0", "npulab-run-1"]
    assert all(user.uid != 0 for user in found.users)
    # The single run user of earlier versions, still named in a worker.env: the pool.
    assert isinstance(runuser.choose(runuser.LEGACY_USER, slots=2), RunUserPool)
    too_many = len(runuser.existing_pool()) + 1
    with pytest.raises(RunUserError, match=r"the run-user pool has \d+ users, this worker runs"):
        runuser.choose(runuser.AUTO, slots=too_many)
    named = runuser.choose("nobody")
    assert isinstance(named, runuser.SharedRunUser)
    assert not named.exclusive
    with pytest.raises(RunUserError, match="runs never execute as root"):
        runuser.choose("")
    with pytest.raises(RunUserError, match="runs never execute as root"):
        runuser.choose("root")


def test_the_prepare_command_makes_the_pool_and_lets_each_user_through(top: Path) -> None:
    private = top / "private"
    (private / "work").mkdir(parents=True)
    private.chmod(0o700)
    # As make run names them: the work directory, and (here: a clone in a `mktemp -d`
    # folder) the checkout the runner is imported from.
    paths = [str(private / "work"), str(PACKAGE_ROOT / "workers")]
    assert runuser.main(["--users", "2", *paths]) == 0
    assert runuser.main(["--users", "2", *paths]) == 0  # idempotent
    # Under leases, as a worker would: a stack on this machine may use the pool.
    machines = RunUserPool(runuser.existing_pool())
    leases = [machines.lease(), machines.lease()]
    try:
        for lease in leases:
            lease.user.check_can_run(SYSTEM_PYTHON, str(private / "work"))
    finally:
        for lease in leases:
            lease.end([])


# Processes that make one new user at once, as host workers starting together on a fresh
# machine make the pool.
RACERS = 4
MAKE_AT_ONCE = """
import os, sys
from workers.host import runuser
open(os.path.join(sys.argv[2], str(os.getpid())), "w").close()
sys.stdin.readline()
print(runuser.ensure_user(sys.argv[1]).uid, flush=True)
"""


def test_processes_making_the_same_new_user_at_once_all_get_it(tmp_path: Path) -> None:
    name = f"npulab-test-new-{os.getpid()}"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", MAKE_AT_ONCE, name, str(tmp_path)],
            cwd=PACKAGE_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(RACERS)
    ]
    try:
        # Every one imported and waiting; then all let go together.
        wait_until(lambda: len(list(tmp_path.iterdir())) == RACERS, "every racer", DEADLINE_S)
        for racer in racers:
            racer.stdin.write("go\n")
            racer.stdin.flush()
        ended = [racer.communicate(timeout=DEADLINE_S) for racer in racers]
        assert [racer.returncode for racer in racers] == [0] * RACERS, ended
        assert {out.strip() for out, _ in ended} == {str(RunUser(name).uid)}
    finally:
        for racer in racers:
            racer.kill()
        subprocess.run(["userdel", name], capture_output=True, check=False)


def test_a_worker_checks_every_pool_user_can_run_the_interpreter(top: Path) -> None:
    config: HostConfig = host_config(top / "work", python=SYSTEM_PYTHON, devices=2)
    config.run_user = runuser.AUTO
    config.sandbox = "off"
    (top / "work").mkdir()
    runuser.ensure_pool(2)
    for user in runuser.existing_pool():
        runuser.grant_traverse(user.name, [str(PACKAGE_ROOT / "workers"), str(top / "work")])
    run_users, run_sandbox = confine(config, slots=2)
    assert isinstance(run_users, RunUserPool)
    assert run_sandbox is None


# -- hostile runs at once -------------------------------------------------------------------

HOSTILE = r"""
import json, os, sys, time

me = os.environ["ROLE"]
flags = os.environ["FLAGS"]
secret = os.path.join(os.environ["HOME"], "secret.txt")
with open(secret, "w") as handle:
    handle.write(os.environ["MARK"])
os.chmod(secret, 0o644)
print(f"{me} uid {os.getuid()}", flush=True)
if me == "early":
    sys.exit(0)
with open(os.path.join(os.environ["HOME"], "pid"), "w") as handle:
    handle.write(str(os.getpid()))
print(f"{me} READY", flush=True)
while not os.path.exists(os.path.join(flags, "go")):
    if os.path.exists(os.path.join(flags, "end")):
        sys.exit(3)  # the test gave up
    time.sleep(0.05)
targets = json.load(open(os.path.join(flags, "go")))[me]


def show(name, data):
    print(f"{me} GOT {name} {data!r}"[:400], flush=True)


for name, path in sorted(targets["paths"].items()):
    try:
        if os.path.isdir(path):
            show(name, os.listdir(path))
        else:
            with open(path, errors="replace") as handle:
                show(name, handle.read())
    except Exception as exc:
        print(f"{me} DENIED {name} {type(exc).__name__}", flush=True)
for pid in targets["pids"]:
    for what in ("environ", "cwd", "cwd/spec.json"):
        path = f"/proc/{pid}/{what}"
        try:
            if what == "cwd":
                show(what, os.listdir(path))
            else:
                with open(path, "rb") as handle:
                    show(what, handle.read())
        except Exception as exc:
            print(f"{me} DENIED {what} of {pid} {type(exc).__name__}", flush=True)
# Any process at all whose environment or working directory gives another run away.
for name in os.listdir("/proc"):
    if not name.isdigit() or int(name) == os.getpid():
        continue
    try:
        with open(f"/proc/{name}/environ", "rb") as handle:
            data = handle.read()
        if b"MARK=" in data and os.environ["MARK"].encode() not in data:
            show(f"environ of {name}", data)
    except Exception:
        pass
print(f"{me} PROBED", flush=True)
while not os.path.exists(os.path.join(flags, "end")):
    time.sleep(0.05)
"""


def claim(top: Path, role: str, device: int) -> dict[str, Any]:
    """A hostile run's claim; its ``MARK`` is what no other run may get hold of."""
    mark = f"mark-of-{role}-{os.urandom(8).hex()}"
    env = {"ROLE": role, "FLAGS": str(top / "flags"), "MARK": mark}
    return {**training_claim(top, HOSTILE, env=env), "devices": [device]}


def mark_of(claimed: dict[str, Any]) -> str:
    return claimed["spec"]["env"]["MARK"]


def lines_of(platform: FakePlatform, run_id: int) -> list[str]:
    return [str(event.get("line", "")) for event in platform.stored_events(run_id)]


def test_two_hostile_runs_at_once_read_nothing_of_each_other_nor_of_an_earlier_run(
    pool: RunUserPool, top: Path
) -> None:
    (top / "flags").mkdir(mode=0o755)
    work = top / "work"
    work.mkdir()
    platform = FakePlatform()
    agent = HostAgent(host_config(work, python=SYSTEM_PYTHON, devices=2), platform, pool)
    early, one, two = claim(top, "early", 0), claim(top, "one", 0), claim(top, "two", 1)
    platform.claims.update({1: early, 2: one, 3: two})

    agent.execute(1, ATTEMPT)
    early_uid = int(next(ln for ln in lines_of(platform, 1) if ln.startswith("early uid"))[10:])
    threads = [
        threading.Thread(target=agent.execute, args=(run_id, ATTEMPT), daemon=True)
        for run_id in (2, 3)
    ]
    for thread in threads:
        thread.start()
    try:
        for run_id, role in ((2, "one"), (3, "two")):
            wait_until(
                lambda r=run_id, n=role: (
                    f"{n} READY" in lines_of(platform, r) or platform.finished[1:]
                ),
                f"run {role} to start",
                DEADLINE_S,
            )
            assert not platform.finished[1:], [lines_of(platform, r) for r in (2, 3)]
        runs = work / "runs"

        def targets(other: int) -> dict[str, Any]:
            attempt = runs / str(other) / "attempt-1"
            pids = [int((runs / str(other) / "home" / "pid").read_text())]
            pids.append(int((attempt / "supervisor.pid").read_text()))
            return {
                "paths": {
                    "other spec": str(attempt / "spec.json"),
                    "other events": str(attempt / "events.jsonl"),
                    "other home": str(runs / str(other) / "home" / "secret.txt"),
                    "other folder": str(attempt),
                    "earlier spec": str(runs / "1" / "attempt-1" / "spec.json"),
                    "earlier events": str(runs / "1" / "attempt-1" / "events.jsonl"),
                    "earlier home": str(runs / "1" / "home" / "secret.txt"),
                    "earlier folder": str(runs / "1"),
                },
                "pids": pids,
            }

        go = {"one": targets(3), "two": targets(2)}
        (top / "flags" / "go").write_text(json.dumps(go))
        (top / "flags" / "go").chmod(0o644)
        for run_id, role in ((2, "one"), (3, "two")):
            wait_until(
                lambda r=run_id, n=role: f"{n} PROBED" in lines_of(platform, r),
                f"run {role} to try its reads",
                DEADLINE_S,
            )
        live_uids = {
            role: int(next(ln for ln in lines_of(platform, r) if ln.startswith(f"{role} uid"))[8:])
            for r, role in ((2, "one"), (3, "two"))
        }
    finally:
        (top / "flags" / "end").write_text("")
        for thread in threads:
            thread.join(timeout=DEADLINE_S)
    assert not any(thread.is_alive() for thread in threads)

    # Two runs at once, two users; the earlier run's user was free again and taken.
    assert live_uids["one"] != live_uids["two"]
    assert early_uid in live_uids.values()
    assert set(live_uids.values()) == {user.uid for user in pool.users}
    for run_id, role in ((2, "one"), (3, "two")):
        lines = lines_of(platform, run_id)
        tried = go[role]
        assert not [line for line in lines if f"{role} GOT" in line], lines
        for name in tried["paths"]:
            assert f"{role} DENIED {name} PermissionError" in lines, (name, lines)
        for pid in tried["pids"]:
            for what in ("environ", "cwd", "cwd/spec.json"):
                assert any(line.startswith(f"{role} DENIED {what} of {pid} ") for line in lines)
        text = json.dumps(platform.stored_events(run_id))
        for other in (early, one, two):
            if other["spec"]["env"]["ROLE"] != role:
                assert mark_of(other) not in text
        assert platform.stored_events(run_id)[-1]["status"] == "succeeded"
    # Every run's folder is the worker's again, closed; no process of the pool is left.
    for run_id in (1, 2, 3):
        folder = work / "runs" / str(run_id)
        assert folder.stat().st_uid == os.geteuid()
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for user in pool.users:
        assert runuser.processes_of(user.uid) == []


# Run "hostile" moves its attempt's folder aside for a link to run "victim"'s, then
# ignores the stop; the victim only waits. Each writes its pid in its home.
SWAPS = r"""
import os, signal, threading, time

role, here = os.environ["ROLE"], os.environ["NPULAB_RUN_DIR"]
with open(os.path.join(os.environ["HOME"], "pid"), "w") as handle:
    handle.write(str(os.getpid()))
if role == "hostile":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print(f"{role} READY", flush=True)
if role == "hostile":
    while not os.path.exists(os.path.join(os.environ["FLAGS"], "go")):
        time.sleep(0.05)
    victim = os.path.join(os.path.dirname(os.path.dirname(here)), "3", "attempt-1")
    os.rename(here, here + "-moved")
    os.symlink(victim, here)
threading.Event().wait()
"""


def test_a_run_that_swapped_its_folder_for_a_link_to_anothers_is_stopped_alone(
    pool: RunUserPool, top: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without the sandbox a run's user owns runs/<id>/. Stopped, the run was killed by the
    # pid files and the folder name found through the link: the other run's processes.
    monkeypatch.setattr(agent_module, "CANCEL_GRACE_S", 0.0)
    (top / "flags").mkdir(mode=0o755)
    work = top / "work"
    work.mkdir()
    platform = FakePlatform()
    agent = HostAgent(host_config(work, python=SYSTEM_PYTHON, devices=2), platform, pool)
    env = {"FLAGS": str(top / "flags")}
    for run_id, role, device in ((2, "hostile", 0), (3, "victim", 1)):
        claimed = training_claim(top, SWAPS, env={**env, "ROLE": role})
        platform.claims[run_id] = {**claimed, "devices": [device]}
    threads = {
        run_id: threading.Thread(target=agent.execute, args=(run_id, ATTEMPT), daemon=True)
        for run_id in (2, 3)
    }
    for thread in threads.values():
        thread.start()
    try:
        for run_id, role in ((2, "hostile"), (3, "victim")):
            wait_until(
                lambda r=run_id, n=role: f"{n} READY" in lines_of(platform, r),
                f"run {role} to start",
                DEADLINE_S,
            )
        victim = int((work / "runs" / "3" / "home" / "pid").read_text())
        (top / "flags" / "go").write_text("")
        (top / "flags" / "go").chmod(0o644)
        wait_until(lambda: (work / "runs" / "2" / "attempt-1").is_symlink(), "the swap", DEADLINE_S)

        agent.cancel(2)
        threads[2].join(timeout=DEADLINE_S)
        assert not threads[2].is_alive()

        [(run_id, _, report)] = platform.finished
        assert (run_id, report["stop_reason"]) == (2, "cancel requested")
        assert alive(victim)
        assert agent.running_ids() == [3]
        # Nor did the end of the hostile run remove the victim's pid file (a restarted
        # worker would no longer find the victim's supervisor to stop).
        assert (work / "runs" / "3" / "attempt-1" / SUPERVISOR_PID).exists()
    finally:
        agent.shutdown()
        for thread in threads.values():
            thread.join(timeout=DEADLINE_S)
    # What the hostile run left went with the end of its lease.
    for user in pool.users:
        assert runuser.processes_of(user.uid) == []
