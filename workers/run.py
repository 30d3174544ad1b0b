"""Execute one run spec on this host, with or without the platform.

    python -m workers.run SPEC.json --run-dir DIR

writes DIR/events.jsonl and exits 0 when the result is succeeded, 1 when it
failed and 2 when the spec is invalid (the reason on stderr). The host worker
runs exactly this command in a subprocess; a user runs it to reproduce a run.

A directory has one owner at a time (``workers.processes.own_run_dir``): while
an earlier execution, or a process it started, still lives, a new one exits 3
with the owner's pid on stderr and leaves the directory as it is.

Two processes: this supervisor, and a child (``--child``) in its own process
group that imports torch and does the work, and dies with the supervisor.
The supervisor turns the child's stdout and stderr (C++ libraries included)
into log events, writes heartbeats, enforces ``timeout_s`` and always writes
the ``result`` line: a segfault in an operator kills the child, never the
record of what happened.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from typing import IO, Any, Iterator

from workers import __version__
from workers.backends import get_backend
from workers.capture.session import Capture
from workers.contract import exits, kinds, script_env
from workers.contract.devices import VISIBLE_DEVICES_ENV
from workers.contract.diagnosis import ON_HANG_KEEP, ON_HANG_REQUEUE, PROCESS_LOG_ENV
from workers.contract.events import (
    DIAGNOSIS,
    EVENTS_FILE,
    MAX_LINE_CHARS,
    RUNNER,
    STDERR,
    STDOUT,
)
from workers.contract.exits import (
    EXIT_FAILED,
    EXIT_INVALID_SPEC,
    EXIT_RUN_DIR_BUSY,
    EXIT_SUCCEEDED,
)
from workers.contract.ranks import line_rank
from workers.contract.spec import SpecError, split_submission
from workers.diagnosis import watch as diagnosis_watch
from workers.events import EventWriter
from workers.kinds.base import Outcome, RunContext
from workers.processes import (
    CHILD_PID_FILE,
    OWNER_LOCK_FD_ENV,
    RunDirBusy,
    dying_with_this_process,
    kill_group,
    kill_registered,
    own_run_dir,
    registered_groups,
    write_pid_file,
)
from workers.tracebacks import exception_line

RESULT_FILE = "result.json"
STDERR_TAIL_LINES = 40
# Kept to find the exception a child died of: a traceback's frames come first.
STDERR_SCAN_LINES = 400
# A printed line is read at most this many bytes at a time (a UTF-8 character is up to 4):
# a script that prints a gigabyte with no newline must not make the supervisor hold it.
READ_LINE_BYTES = 4 * MAX_LINE_CHARS + 4
HEARTBEAT_S = float(os.environ.get(script_env.HEARTBEAT_S, "10"))
KILL_GRACE_S = float(os.environ.get(script_env.KILL_GRACE_S, "10"))
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workers.run", description="Execute one npulab run spec on this host."
    )
    parser.add_argument("spec", help="path of the spec JSON document")
    parser.add_argument("--run-dir", required=True, help="directory for events.jsonl and outputs")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    run_dir = os.path.abspath(args.run_dir)
    os.makedirs(run_dir, exist_ok=True)
    lock_fd = -1
    if not args.child:
        try:
            lock_fd = own_run_dir(run_dir)
        except RunDirBusy as exc:
            print(f"refused: {exc}", file=sys.stderr)
            return EXIT_RUN_DIR_BUSY
    events = EventWriter(os.path.join(run_dir, EVENTS_FILE))
    try:
        try:
            spec = load_spec(args.spec)
        except SpecError as exc:
            print(f"invalid spec: {exc}", file=sys.stderr)
            if not args.child:
                events.result(exits.FAILED, f"invalid spec: {exc}", cause=exits.SPEC_INVALID)
            return EXIT_INVALID_SPEC
        if args.child:
            return run_child(spec, run_dir, events)
        return Supervisor(spec, args.spec, run_dir, events, lock_fd).run()
    finally:
        events.close()


def load_spec(path: str) -> dict[str, Any]:
    """Read and validate a spec file; queueing fields of a submission are ignored."""
    try:
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
    except OSError as exc:
        raise SpecError({"spec": f"cannot read {path}: {exc.strerror}"}) from exc
    except ValueError as exc:
        raise SpecError({"spec": f"{path} is not valid JSON: {exc}"}) from exc
    if isinstance(doc, dict):
        doc, _ = split_submission(doc)
    return kinds.validate(doc)


def read_lines(pipe: IO[bytes], limit: int = READ_LINE_BYTES) -> Iterator[str]:
    """The lines of ``pipe``, decoded (invalid UTF-8 replaced), each read ``limit`` bytes at
    most: of a longer line only its first ``limit`` bytes are kept (the log cuts it further,
    saying so), the rest is read past and dropped, so memory stays bounded."""
    skipping = False
    for raw in iter(lambda: pipe.readline(limit), b""):
        ended = raw.endswith(b"\n")
        if skipping:
            skipping = not ended
            continue
        skipping = not ended and len(raw) >= limit
        yield raw.decode("utf-8", errors="replace").rstrip("\r\n")


class Supervisor:
    """Runs the child, relays its output, and writes the one result line."""

    def __init__(
        self,
        spec: dict[str, Any],
        spec_path: str,
        run_dir: str,
        events: EventWriter,
        lock_fd: int,
    ):
        self.spec = spec
        self.lock_fd = lock_fd
        self.spec_path = os.path.abspath(spec_path)
        self.run_dir = run_dir
        self.events = events
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_SCAN_LINES)
        self.stop_signal: int | None = None
        self.child: subprocess.Popen | None = None
        # The diagnosis is made as the run goes (docs/diagnosis.md); a hang or a NaN
        # loss that ends the run leaves its cause here.
        self.watch = diagnosis_watch.RunWatch(
            spec, run_dir, os.path.join(run_dir, EVENTS_FILE), library_roots=(_PACKAGE_ROOT,)
        )
        self.stopped_for: tuple[str, str] | None = None
        self.capture = Capture(spec, run_dir, events)

    def run(self) -> int:
        result_path = os.path.join(self.run_dir, RESULT_FILE)
        if os.path.exists(result_path):
            os.unlink(result_path)  # left by an earlier execution in this directory
        self.events.log(
            RUNNER,
            f"npulab runner {__version__}: {self.spec['kind']} run on {self.spec['device_type']}, "
            f"python {sys.version.split()[0]} ({sys.executable}), pid {os.getpid()}",
        )
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._on_signal)

        self.capture.start()
        self.child = subprocess.Popen(
            [sys.executable, "-m", "workers.run", "--child", self.spec_path, "--run-dir", "."],
            cwd=self.run_dir,
            env=self._child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            # The directory stays owned while the child lives, even if it outlives us.
            pass_fds=(self.lock_fd,),
            preexec_fn=dying_with_this_process(),
        )
        write_pid_file(os.path.join(self.run_dir, CHILD_PID_FILE), self.child.pid)
        child = self.child.pid
        self.watch.watch_devices(
            self.spec["device_type"],
            self._devices(),
            lambda: [child, *registered_groups(self.run_dir)],
        )
        pumps = [
            self._pump(self.child.stdout, STDOUT),
            self._pump(self.child.stderr, STDERR),
        ]
        beating = threading.Event()
        threading.Thread(target=self._heartbeat, args=(beating,), daemon=True).start()

        timed_out = self._wait(time.monotonic() + self.spec["timeout_s"])
        beating.set()
        for pump in pumps:
            # A grandchild that daemonised may hold the pipe open forever.
            pump.join(timeout=5)
        self.capture.stop()
        outcome = self._outcome(timed_out, result_path)
        diagnosed = self.watch.finish(outcome.status, outcome.cause, self._devices())
        if self.watch.collected:
            # The plogs, kernel messages and device health go to the platform with the run.
            self.events.artifact("diagnosis.tar.gz", self.watch.collected, kind="report")
        if diagnosed is not None:
            self.events.emit(DIAGNOSIS, **diagnosed)
        self.events.result(outcome.status, outcome.reason, outcome.summary, outcome.cause)
        return EXIT_SUCCEEDED if outcome.status == exits.SUCCEEDED else EXIT_FAILED

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.spec["env"])
        env[script_env.RUN_DIR] = self.run_dir
        # CANN's process logs land with the run, not in ~/ascend/log; the spec's own wins.
        env[PROCESS_LOG_ENV] = diagnosis_watch.process_log_path(self.spec["env"], self.run_dir)
        for name, value in self.capture.environment().items():
            # A script the spec sends to an MLflow server of its own keeps it.
            if name not in self.spec["env"]:
                env[name] = value
        env[OWNER_LOCK_FD_ENV] = str(self.lock_fd)
        env["PYTHONUNBUFFERED"] = "1"
        # The child runs in the run directory; make this package importable there.
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = _PACKAGE_ROOT + (os.pathsep + path if path else "")
        return env

    def _pump(self, pipe: IO[bytes] | None, stream: str) -> threading.Thread:
        def relay() -> None:
            assert pipe is not None
            for line in read_lines(pipe):
                if stream == STDERR:
                    self.stderr_tail.append(line)
                # A line a rank of a multi-process run printed says which (``[rank3]: …``):
                # the log keeps it as the line's rank too, for its rank selector.
                self.events.log(stream, line, line_rank(line))
                self.watch.line(stream, line)
                self.capture.line(stream, line)
            pipe.close()

        thread = threading.Thread(target=relay, daemon=True)
        thread.start()
        return thread

    def _heartbeat(self, stop: threading.Event) -> None:
        while not stop.wait(HEARTBEAT_S):
            self.events.heartbeat()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.stop_signal = signum

    def _wait(self, deadline: float) -> bool:
        """Wait for the child; stop it on a signal or at the deadline. True if timed out."""
        assert self.child is not None
        next_poll = 0.0
        while True:
            try:
                self.child.wait(timeout=0.2)
                return False
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() >= next_poll:
                next_poll = time.monotonic() + 1.0
                if self._diagnosis_stops():
                    return False
            if self.stop_signal is not None:
                self.events.log(
                    RUNNER,
                    f"received {signal.Signals(self.stop_signal).name}, stopping the run",
                )
                self._kill_child()
                return False
            if time.monotonic() >= deadline:
                self.events.log(RUNNER, f"timeout of {self.spec['timeout_s']} s reached")
                self._kill_child()
                return True

    def _diagnosis_stops(self) -> bool:
        """A hang or a NaN loss the spec says ends the run: stop it; True if stopped."""
        assert self.child is not None
        found = self.watch.poll()
        if found == diagnosis_watch.NAN:
            reason = "stop_on_nan: " + str((self.watch.health.first_nan or {}).get("message"))
            self.events.log(RUNNER, reason + "; stopping the run")
            self.stopped_for = (exits.NAN_LOSS, reason)
        elif found == diagnosis_watch.BUSY:
            self.events.log(
                RUNNER,
                f"no event for {self.watch.hang_timeout_s} s (hang_timeout_s), but the devices "
                f"compute ({self.watch.activity.last_pct:.0f} % utilisation): not a hang",
            )
            return False
        elif found == diagnosis_watch.HANG:
            reason = f"no progress for {self.watch.hang_timeout_s} s (hang_timeout_s)"
            stacks = self.watch.capture_stacks([self.child.pid, *registered_groups(self.run_dir)])
            self.events.log(RUNNER, f"{reason}; stacks in {stacks}; on_hang={self.watch.on_hang}")
            if self.watch.on_hang == ON_HANG_KEEP:
                return False
            cause = exits.HANG_REQUEUED if self.watch.on_hang == ON_HANG_REQUEUE else exits.HANG
            self.stopped_for = (cause, reason)
        else:
            return False
        self._kill_child()
        return True

    def _devices(self) -> list[int]:
        visible = self._child_env().get(VISIBLE_DEVICES_ENV.get(self.spec["device_type"], ""), "")
        return [int(item) for item in visible.split(",") if item.strip().isdigit()]

    def _kill_child(self) -> None:
        """SIGTERM the child's process group, SIGKILL whatever is left after the grace period."""
        assert self.child is not None
        kill_group(self.child.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.child.wait(timeout=KILL_GRACE_S)
        # Also reaches descendants that outlived the child itself, and the
        # process groups the child started (a training launcher and its ranks).
        kill_registered(self.run_dir, also=(self.child.pid,))
        self.child.wait()

    def _outcome(self, timed_out: bool, result_path: str) -> Outcome:
        assert self.child is not None
        code = self.child.returncode
        tail = list(self.stderr_tail)[-STDERR_TAIL_LINES:]
        if self.stop_signal is not None:
            name = signal.Signals(self.stop_signal).name
            return Outcome(
                exits.FAILED, f"stopped by {name}", {"stderr_tail": tail}, exits.TERMINATED
            )
        if self.stopped_for is not None:
            cause, reason = self.stopped_for
            return Outcome(exits.FAILED, reason, {"stderr_tail": tail}, cause)
        if timed_out:
            reason = f"timed out after {self.spec['timeout_s']} s"
            return Outcome(exits.FAILED, reason, {"stderr_tail": tail}, exits.TIMEOUT)
        reported = _read_result(result_path)
        if reported is not None and code in (EXIT_SUCCEEDED, EXIT_FAILED):
            return reported
        if code is not None and code < 0:
            reason = f"runner killed by signal {_signal_name(-code)}"
        else:
            reason = f"runner exited with code {code} without a result"
        error = exception_line(self.stderr_tail)
        if error:
            reason += f": {error}"
        elif tail:
            reason += f"; last stderr line: {tail[-1]}"
        return Outcome(exits.FAILED, reason, {"stderr_tail": tail}, exits.PROCESS_EXIT)


def run_child(spec: dict[str, Any], run_dir: str, events: EventWriter) -> int:
    """The child side: run the kind's runner and leave its outcome in result.json."""
    context = RunContext(spec, get_backend(spec["device_type"]), events, run_dir)
    try:
        runner = importlib.import_module(kinds.get(spec["kind"]).runner)
        outcome = runner.run(context)
    except Exception as exc:
        traceback.print_exc()
        outcome = Outcome(exits.FAILED, f"runner error: {type(exc).__name__}: {exc}")
    _write_result(os.path.join(run_dir, RESULT_FILE), outcome)
    return EXIT_SUCCEEDED if outcome.status == exits.SUCCEEDED else EXIT_FAILED


def _write_result(path: str, outcome: Outcome) -> None:
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(outcome.as_dict(), handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def _read_result(path: str) -> Outcome | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("status") not in exits.RESULT_STATUSES:
        return None
    try:
        return Outcome(
            data["status"],
            str(data.get("reason", "")),
            data.get("summary") or {},
            str(data.get("cause") or ""),
        )
    except ValueError:  # a cause no kind declares: the supervisor says what it saw instead
        return None


def _signal_name(signum: int) -> str:
    try:
        return f"{signal.Signals(signum).name} ({signum})"
    except ValueError:
        return str(signum)


if __name__ == "__main__":
    sys.exit(main())
