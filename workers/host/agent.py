"""The host agent: registration, heartbeats and the execution of runs."""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
import platform
import signal
import socket
import subprocess
import threading
import time
from typing import Any, Callable

from workers import __version__
from workers.contract import kinds, script_env
from workers.contract.devices import VISIBLE_DEVICES_ENV
from workers.contract.diagnosis import ERROR_TABLES
from workers.contract.events import ARTIFACT, EVENTS_FILE, RUNNER
from workers.contract.exits import EXIT_INVALID_SPEC, EXIT_RUN_DIR_BUSY
from workers.contract.gang import (
    GANG,
    RANK_TABLE_FILE,
    RANK_TABLE_NAME,
    dumps_rank_table,
    launch_env,
)
from workers.contract.spec import host_inputs
from workers.events import EventWriter
from workers.host import capabilities
from workers.host.artifacts import ArtifactUploader
from workers.host.client import PlatformClient, PlatformRejected, PlatformUnavailable
from workers.host.config import HostConfig
from workers.host.devices import detect
from workers.host.forwarder import (
    ATTEMPT_PREFIX,
    OFFSET_FILE,
    Forwarder,
    RunGone,
    max_batch_events,
)
from workers.host.preflight import preflight
from workers.host.runenv import clean_env
from workers.host.runuser import Lease, RunUser, RunUserError, RunUsers, SharedRunUser
from workers.host.sandbox import Sandbox
from workers.host.snapshots import SnapshotFailed, collect_and_send
from workers.processes import CHILD_PID_FILE, kill_group, kill_registered, write_pid_file
from workers.safefiles import (
    drop_links,
    fd_path,
    open_beneath,
    open_file,
    read_text,
    real_dir,
    write_whole,
)

log = logging.getLogger(__name__)

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUPERVISOR_LOG = "supervisor.log"
SUPERVISOR_PID = "supervisor.pid"
SPEC_FILE = "spec.json"
# The files the worker itself writes in an attempt's folder.
WORKER_FILES = (
    SPEC_FILE,
    EVENTS_FILE,
    OFFSET_FILE,
    SUPERVISOR_LOG,
    SUPERVISOR_PID,
    RANK_TABLE_NAME,
)
# Beyond the spec's timeout, which the supervisor enforces itself, the time
# it gets to stop its child and write the result before it is killed.
HARD_KILL_GRACE_S = 60.0
CANCEL_GRACE_S = 15.0


class HostAgent:
    """One per host worker process; runs execute in Celery's worker threads."""

    def __init__(
        self,
        config: HostConfig,
        client: PlatformClient,
        run_users: RunUsers | RunUser | None = None,
        sandbox: Sandbox | None = None,
    ):
        self.config = config
        self.client = client
        # Who each run attempt executes as (a root worker's): a lease of its own.
        if isinstance(run_users, RunUser):
            run_users = SharedRunUser(run_users)
        self.run_users = run_users
        self.sandbox = sandbox
        self.name = ""
        self.queue = ""
        self.devices: list[dict[str, Any]] = []
        self.device_type = ""  # known once registered, like the devices
        self.shutting_down = threading.Event()
        self._snapshot_lock = threading.Lock()
        self._running: dict[int, RunExecution] = {}
        # Runs whose attempt an earlier worker process left ended but unreported
        # (``workers.host.left``): listed as running until reported.
        self._finishing: set[int] = set()
        self._lock = threading.Lock()

    # -- registration and liveness ---------------------------------------

    def facts(self) -> dict[str, Any]:
        device_type, devices = detect(self.config.device_type, self.config.devices)
        return {
            "hostname": socket.gethostname(),
            "device_type": device_type,
            "devices": devices,
            "labels": self.config.labels,
            "worker_version": __version__,
            "python": platform.python_version(),
            "run_python": self.config.python,
            "platform": platform.platform(),
            "network": self.config.network,
        }

    def register(self, retry_s: float = 5.0) -> dict[str, Any]:
        """Register until the platform answers; PlatformRejected (a bad token) is final."""
        facts = self.facts()
        while True:
            try:
                reply = self.client.register(facts)
                break
            except PlatformUnavailable as exc:
                log.warning("platform unavailable, retrying registration: %s", exc)
                time.sleep(retry_s)
        self.name = reply["name"]
        self.queue = reply["queue"]
        self.devices = facts["devices"]
        self.device_type = facts["device_type"]
        log.info(
            "registered as host %r: %d %s device(s), queue %s",
            self.name,
            len(facts["devices"]),
            facts["device_type"],
            self.queue,
        )
        return reply

    def heartbeat_forever(self, stop: threading.Event) -> None:
        while not stop.wait(self.config.heartbeat_s):
            try:
                reply = self.client.heartbeat(self.running_ids())
            except PlatformUnavailable as exc:
                log.warning("heartbeat failed: %s", exc)
                continue
            except PlatformRejected as exc:
                log.error("heartbeat refused: %s", exc)
                continue
            for run_id in reply.get("cancel", []):
                self.cancel(run_id)
            if reply.get("snapshot"):
                self.send_snapshot_soon()

    def send_snapshot_soon(self) -> None:
        """Collect and send a snapshot of the default run interpreter, in the background."""
        if not self._snapshot_lock.acquire(blocking=False):
            return  # one is on its way already

        def send() -> None:
            try:
                collect_and_send(self.client, self.config.python)
            except SnapshotFailed as exc:
                log.warning("%s", exc)
            finally:
                self._snapshot_lock.release()

        threading.Thread(target=send, name="snapshot", daemon=True).start()

    def running_ids(self) -> list[int]:
        with self._lock:
            return sorted({*self._running, *self._finishing})

    def list_as_running(self, run_ids: list[int]) -> None:
        with self._lock:
            self._finishing.update(run_ids)

    def unlist(self, run_id: int) -> None:
        with self._lock:
            self._finishing.discard(run_id)

    def cancel(self, run_id: int) -> None:
        with self._lock:
            execution = self._running.get(run_id)
        if execution is not None:
            execution.stop("cancel requested")

    def shutdown(self) -> None:
        """Stop every run: a run must not outlive the worker that forwards its events."""
        self.shutting_down.set()
        with self._lock:
            executions = list(self._running.values())
        for execution in executions:
            execution.stop("the host worker is shutting down")

    # -- execution ---------------------------------------------------------

    def execute(self, run_id: int, attempt: int) -> None:
        """Claim a run attempt, execute it to the end and report how it ended."""
        try:
            claim = self._claim(run_id, attempt)
        except PlatformRejected as exc:
            log.info("run %s attempt %s not claimed: %s", run_id, attempt, exc)
            return
        except PlatformUnavailable as exc:
            # The platform requeues the run once its dispatch times out.
            log.warning(
                "run %s attempt %s not claimed, platform unavailable: %s", run_id, attempt, exc
            )
            return
        execution = RunExecution(self, run_id, attempt, claim)
        with self._lock:
            self._running[run_id] = execution
        try:
            execution.run()
        finally:
            with self._lock:
                self._running.pop(run_id, None)

    def _claim(self, run_id: int, attempt: int) -> dict[str, Any]:
        # The platform requeues a dispatched run that is not claimed in time,
        # so a short outage is worth riding out here, a long one is not.
        deadline = time.monotonic() + self.config.claim_retry_s
        while True:
            try:
                return self.client.claim(run_id, attempt)
            except PlatformUnavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1.0)


class RunExecution:
    """One run attempt on this host: the supervisor process and its forwarder."""

    def __init__(self, agent: HostAgent, run_id: int, attempt: int, claim: dict[str, Any]):
        self.agent = agent
        self.run_id = run_id
        self.attempt = attempt
        self.spec: dict[str, Any] = claim["spec"]
        self.devices: list[int] = claim.get("devices", [])
        self.claim = claim
        # The rendezvous and this host's ranks; set for a run across hosts only.
        gang = claim.get(GANG) or {}
        self.gang: dict[str, Any] | None = gang if gang.get("hosts", 1) > 1 else None
        self.max_events = max_batch_events(claim)
        self.run_dir = os.path.join(
            agent.config.work_dir, "runs", str(run_id), f"{ATTEMPT_PREFIX}{attempt}"
        )
        # What the run's kind declares beyond a plain run (checkpoints), made in ``run``.
        self.capabilities: list[capabilities.AttemptCapability] = []
        self.artifacts = ArtifactUploader(
            agent.client, run_id, self.run_dir, give_up=agent.shutting_down
        )
        self.process: subprocess.Popen | None = None
        self.stop_reason = ""
        # The CANN error tables the run's snapshot found (None: no snapshot was taken).
        self.error_tables: list[str] | None = None
        self._stopping_since: float | None = None

    def run(self) -> None:
        # An earlier execution of this attempt (a requeue) may have left links in place of
        # the folder or of the files the worker writes there: it writes none through them.
        real_dir(self.run_dir)
        drop_links(self.run_dir, WORKER_FILES)
        self.capabilities = self.make_capabilities()
        # Before anything is fetched or written into them: shared with earlier attempts,
        # whose user may have left a link in place of one.
        for path in (*self._directories(), self._home()):
            real_dir(path)
        spec_path = os.path.join(self.run_dir, SPEC_FILE)
        write_whole(spec_path, json.dumps(self.spec, indent=2).encode("utf-8"))
        python = self.agent.config.python_for(self.spec)
        if self.gang is not None:
            problems = preflight(self.gang, self.devices, self.spec["device_type"])
            if problems:
                # Refused before it started: the platform ends the gang on every host.
                self._finish({"exit_code": None, "error": "pre-flight: " + "; ".join(problems)})
                return
        self._prepare(python)
        lease = None
        if self.agent.run_users is not None:
            try:
                lease = self.agent.run_users.lease(self.agent.shutting_down)
            except RunUserError as exc:
                self._finish({"exit_code": None, "error": str(exc)})
                return
        try:
            self._execute(python, spec_path, lease)
        finally:
            self._end_lease(lease)

    def make_capabilities(self) -> list[capabilities.AttemptCapability]:
        """The host sides of the capabilities the run's kind declares, for this attempt."""
        attempt = capabilities.Attempt(
            self.agent.client,
            self.run_id,
            self.attempt,
            self.run_dir,
            os.path.dirname(self.run_dir),
            self.claim,
            give_up=self.agent.shutting_down,
        )
        return [capability(attempt) for capability in capabilities.for_kind(self.spec["kind"])]

    def make_forwarder(self) -> Forwarder:
        """The forwarder of this attempt's spool, which holds it and its folder from now on,
        acting on what the capabilities act on."""
        return Forwarder(
            self.agent.client,
            self.run_id,
            self.attempt,
            self.run_dir,
            max_events=self.max_events,
            acted_on=tuple(t for c in self.capabilities for t in c.acted_on),
        )

    def _directories(self) -> list[str]:
        """The capabilities' directories the run writes (checkpoints, handoff)."""
        return [path for c in self.capabilities for path in c.directories()]

    def _home(self) -> str:
        return os.path.join(os.path.dirname(self.run_dir), "home")

    def _end_lease(self, lease: Lease | None) -> None:
        """The run user is done with the run's folder: its leftover processes die, the
        folder is the worker's again (mode 700), and only then is the user free."""
        if lease is not None:
            lease.end([os.path.dirname(self.run_dir)])

    def _execute(self, python: str, spec_path: str, lease: Lease | None) -> None:
        env = self._env()
        become = None
        run_user = lease.user if lease is not None else None
        home = self._home()
        directories = self._directories()
        if run_user is not None:
            # Its own directories, and a home of its own: never the worker's (the run's
            # folder above them too, for a host without the sandbox), closed to other users.
            run_user.give([os.path.dirname(self.run_dir)])
            env.update(run_user.env(home))
        else:
            env["HOME"] = home
        command = [python, "-m", "workers.run", spec_path, "--run-dir", self.run_dir]
        sandbox = self.agent.sandbox
        if sandbox is not None:
            kind = kinds.get(self.spec["kind"])
            command = sandbox.argv(
                command,
                python,
                writable=[self.run_dir, *directories, home],
                readable=host_inputs(kind.fields, self.spec) if kind else [],
                run_user=run_user,
                cwd=self.run_dir,
            )
        elif run_user is not None:
            become = run_user.become()
        log.info(
            "run %s attempt %s: starting in %s%s",
            self.run_id,
            self.attempt,
            self.run_dir,
            f" as {run_user.name}" if run_user is not None else "",
        )
        # Before the run can act on its folder: the forwarder holds the spool from here on.
        forwarder = self.make_forwarder()
        try:
            self._run_supervisor(python, command, env, become, forwarder, lease)
        finally:
            forwarder.close()

    def _run_supervisor(
        self,
        python: str,
        command: list[str],
        env: dict[str, str],
        become: Callable[[], None] | None,
        forwarder: Forwarder,
        lease: Lease | None,
    ) -> None:
        log_path = os.path.join(self.run_dir, SUPERVISOR_LOG)
        log_fd = open_file(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        with os.fdopen(log_fd, "ab") as output:
            try:
                self.process = subprocess.Popen(
                    command,
                    cwd=self.run_dir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=become,
                )
            except OSError as exc:
                self._finish({"exit_code": None, "error": f"cannot start {python}: {exc}"})
                return
        write_pid_file(os.path.join(self.run_dir, SUPERVISOR_PID), self.process.pid)
        exit_code = self._supervise(forwarder)
        # The run has ended: what it left is the worker's alone before the events and
        # artifacts go (the worker reads them as itself).
        self._end_lease(lease)
        self.end(forwarder, {"exit_code": exit_code, "exited_at": time.time()})

    def end(self, forwarder: Forwarder, report: dict[str, Any]) -> None:
        """The supervisor has exited: the rest of its events, then the capabilities' and the
        artifacts' uploads, then how it ended, reported. A shutdown first leaves the rest to
        the next worker process (``workers.host.left``)."""
        exit_code = report.get("exit_code")
        try:
            forwarder.drain(give_up=self.agent.shutting_down)
        except RunGone as exc:
            log.warning("run %s: platform refused the remaining events: %s", self.run_id, exc)
        except PlatformUnavailable:
            log.warning("run %s: shutting down with events still spooled", self.run_id)
            return
        self._hand_over(forwarder)
        for capability in self.capabilities:
            if not capability.finish():
                return
        if not self._send_artifacts(forwarder):
            return
        if self.stop_reason:
            report["stop_reason"] = self.stop_reason
        if exit_code in (EXIT_INVALID_SPEC, EXIT_RUN_DIR_BUSY):
            # Refused before it wrote an event: the supervisor's own words say why
            # (a busy directory is the host's leftover: start_failed, restartable).
            report["error"] = self._supervisor_output(forwarder.folder)
        self._finish(report)
        # In the folder the forwarder holds: its name may be a link the run left, to
        # another run's folder, whose pid file a restarted worker needs.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(forwarder.folder, SUPERVISOR_PID))

    def _prepare(self, python: str) -> None:
        """Snapshot the run's interpreter, then what its capabilities prepare (fetch the
        checkpoint to resume from); the run's log says how."""
        events = EventWriter(os.path.join(self.run_dir, EVENTS_FILE))
        try:
            reply, snapshot = collect_and_send(self.agent.client, python, self.run_id)
            change = reply.get("change") if reply.get("new_version") else "unchanged"
            events.log(RUNNER, f"environment snapshot {reply['hash'][:12]} ({change})")
            # The run's diagnosis reads the CANN error tables the snapshot found.
            ascend = snapshot.get("ascend") if isinstance(snapshot.get("ascend"), dict) else {}
            tables = ascend.get(ERROR_TABLES)
            if isinstance(tables, list):
                self.error_tables = [str(path) for path in tables]
        except SnapshotFailed as exc:
            events.log(RUNNER, f"no environment snapshot: {exc}")
        for capability in self.capabilities:
            capability.prepare(events)
        events.close()

    def _send_artifacts(self, forwarder: Forwarder) -> bool:
        """Wait for the announced artifacts' uploads; say in the run's log what was refused.

        False when the worker shuts down first (the uploads resume with the next start).
        """
        self._hand_over(forwarder)
        if not self.artifacts.drain():
            log.warning("run %s: shutting down with artifacts not uploaded", self.run_id)
            return False
        refusals = self.artifacts.take_refusals()
        if refusals:
            events = forwarder.writer()
            for line in refusals:
                events.log(RUNNER, line)
            events.close()
            try:
                forwarder.drain(give_up=self.agent.shutting_down)
            except (RunGone, PlatformUnavailable) as exc:
                log.warning("run %s: refusals not forwarded: %s", self.run_id, exc)
        return True

    def _hand_over(self, forwarder: Forwarder) -> None:
        """Give what the platform acknowledged to the artifact uploader and the capabilities
        (checkpoints to upload), with its last reply (the steps it pinned)."""
        events = forwarder.take_acknowledged()
        for event in events:
            if event.get("type") == ARTIFACT:
                self.artifacts.add(event)
        for capability in self.capabilities:
            mine = [event for event in events if event.get("type") in capability.acted_on]
            capability.acknowledged(mine, forwarder.reply)

    def stop(self, reason: str) -> None:
        """Ask the supervisor to stop; it is killed if it has not after the grace period."""
        if self.process is None or self._stopping_since is not None:
            return
        log.info("run %s: stopping (%s)", self.run_id, reason)
        self.stop_reason = reason
        self._stopping_since = time.monotonic()
        kill_group(self.process.pid, signal.SIGTERM)

    def _supervise(self, forwarder: Forwarder) -> int:
        assert self.process is not None
        hard_deadline = time.monotonic() + self.spec["timeout_s"] + HARD_KILL_GRACE_S
        while self.process.poll() is None:
            back_off = False
            try:
                forwarder.pump()
            except PlatformUnavailable as exc:
                log.debug("run %s: platform unavailable, events stay spooled: %s", self.run_id, exc)
                back_off = True
            except RunGone as exc:
                self.stop(f"platform refused the run: {exc}")
                back_off = True
            self._hand_over(forwarder)
            if forwarder.cancel_requested:
                self.stop("cancel requested")
            if self.agent.shutting_down.is_set():
                # Also a shutdown that came before there was a process to stop.
                self.stop("the host worker is shutting down")
            now = time.monotonic()
            if now > hard_deadline:
                self.stop("supervisor exceeded its timeout")
            if self._stopping_since is not None and now - self._stopping_since > CANCEL_GRACE_S:
                self._kill_everything(forwarder)
            # Both wake as soon as the process exits, so its end is reported at once.
            if back_off:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=self.agent.config.flush_s)
            else:
                # Streams: on as soon as a batch is worth sending (at once while a backlog lasts).
                forwarder.wait(self.agent.config.flush_s, self._exited)
        return self.process.returncode

    def _exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def _kill_everything(self, forwarder: Forwarder) -> None:
        assert self.process is not None
        # Through the folder the forwarder holds: the run may have put a link to another
        # run's folder in place of its own.
        kill_run_processes(forwarder.folder, self.process.pid)

    def _env(self) -> dict[str, str]:
        # The host worker's own credentials and settings never reach user code.
        env = clean_env(os.environ, self.agent.config.run_env_allow)
        env["PYTHONPATH"] = _PACKAGE_ROOT + (
            os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
        )
        env[script_env.RUN_ID] = str(self.run_id)
        env[script_env.ATTEMPT] = str(self.attempt)
        if self.error_tables is not None:
            env[script_env.CANN_ERROR_TABLES] = os.pathsep.join(self.error_tables)
        for capability in self.capabilities:
            env.update(capability.env())
        variable = VISIBLE_DEVICES_ENV[self.spec["device_type"]]
        if variable:
            env[variable] = ",".join(str(index) for index in self.devices)
        if self.gang is not None:
            env.update(launch_env(self.gang))
            if self.gang.get("rank_table"):
                path = os.path.join(self.run_dir, RANK_TABLE_NAME)
                write_whole(path, dumps_rank_table(self.gang["rank_table"]).encode("utf-8"))
                env[RANK_TABLE_FILE] = path
        return env

    def _supervisor_output(self, folder: str) -> str:
        """The end of the supervisor's log in the attempt's held ``folder`` (what the
        platform shows as the run's error)."""
        try:
            descriptor = open_file(os.path.join(folder, SUPERVISOR_LOG), os.O_RDONLY)
        except OSError:
            return ""
        with os.fdopen(descriptor, encoding="utf-8", errors="replace") as handle:
            return handle.read()[-2000:]

    def _finish(self, report: dict[str, Any]) -> None:
        delay = 0.5
        while True:
            try:
                self.agent.client.finish(self.run_id, self.attempt, report)
                log.info("run %s attempt %s: finished (%s)", self.run_id, self.attempt, report)
                return
            except PlatformUnavailable as exc:
                if self.agent.shutting_down.is_set():
                    log.warning("run %s: shutting down before the end was reported", self.run_id)
                    return
                log.warning("run %s: cannot report the end yet: %s", self.run_id, exc)
                self.agent.shutting_down.wait(delay)
                delay = min(delay * 2, 5.0)
            except PlatformRejected as exc:
                log.warning("run %s: end refused: %s", self.run_id, exc)
                return


def reap_orphans(work_dir: str) -> list[tuple[str, bool]]:
    """Kill runs that an earlier host worker process left behind: the directory of each
    attempt it did not see to the end, and whether its run still lived (killed now).

    Supervisors run in sessions of their own, so they outlive a worker that
    was killed. Left alone they would keep devices the platform will lease
    again; the platform marks their runs lost.
    """
    left = []
    runs = os.path.join(work_dir, "runs")
    pattern = os.path.join(runs, "*", f"{ATTEMPT_PREFIX}*", SUPERVISOR_PID)
    for pid_file in glob.glob(pattern):
        run_dir = os.path.dirname(pid_file)
        run, attempt = os.path.basename(os.path.dirname(run_dir)), os.path.basename(run_dir)
        try:
            # A run's user could make its attempt's folder a link to another: no attempt.
            folder = open_beneath(runs, (run, attempt))
        except OSError:
            continue
        try:
            alive, pid = _supervisor_alive(run_dir, folder)
            if alive:
                kill_run_processes(fd_path(folder), pid)
            left.append((run_dir, alive))
            os.unlink(SUPERVISOR_PID, dir_fd=folder)
        finally:
            os.close(folder)
    return left


def _supervisor_alive(run_dir: str, folder: int) -> tuple[bool, int]:
    """Whether the pid the attempt's pid file names is alive and a supervisor of this very
    folder (the run's user could write the file: it may name another worker's run)."""
    try:
        pid = int(read_text(SUPERVISOR_PID, dir_fd=folder).strip())
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            arguments = handle.read().split(b"\0")
    except (OSError, ValueError):
        return False, 0
    return b"workers.run" in arguments and os.fsencode(run_dir) in arguments, pid


def kill_run_processes(run_dir: str, supervisor_pid: int) -> None:
    """SIGKILL a run's supervisor, its child and every process group they registered.

    ``run_dir``: the attempt's folder as held open (``safefiles.fd_path``) where the run
    could have replaced its name by a link: its pid files, and which processes are its,
    would be another run's.
    """
    kill_group(supervisor_pid)
    child: tuple[int, ...] = ()
    with contextlib.suppress(OSError, ValueError):
        child = (int(read_text(os.path.join(run_dir, CHILD_PID_FILE), limit=64).strip()),)
    kill_registered(run_dir, also=child)
