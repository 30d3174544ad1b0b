"""The fork server: cases run in child processes forked from the runner, a batch per child.

The runner process imports torch and the op set once and never runs an op
itself; each batch gets a fresh child from ``os.fork``, which inherits those
imports and costs milliseconds, not the seconds an import takes. A child
tells the runner over a pipe which case (and which sample) it starts and
then its result, so when a child dies or hangs the case it was running is
known exactly; the rest of its batch goes on in a fresh child.

A case that kills its child may be innocent: an earlier case in the same
child may have corrupted the process. So a crash after other cases is re-run
alone; when it then survives, the earlier cases are bisected in fresh
children (half of them, then the case) until the one that makes it crash is
found, and that one is recorded as the crash. Results of a child are held
until it is known which of its cases is to blame, then handed on.
"""

from __future__ import annotations

import collections
import gc
import os
import pickle
import selectors
import signal
import struct
import sys
import time
import traceback
from typing import Any, Callable

from workers.kinds.coverage import CRASH, ERROR, TIMEOUT
from workers.kinds.coverage.cases import Case
from workers.kinds.coverage.classify import death_status, timeout_status
from workers.processes import die_with_parent

_FRAME = struct.Struct("<I")
# The runner wakes at least this often to look for hung cases.
_POLL_S = 0.5
# A child exits with this when its own set-up failed (not a case's fault).
_SETUP_FAILED = 70

Report = Callable[[int, int, list], None]
# Called in a fresh child with its slot and the report function; returns what runs a case.
Setup = Callable[[int, Report], Callable[[Case], dict]]
Emit = Callable[[Case, dict], None]


def _send(fd: int, message: tuple) -> None:
    data = pickle.dumps(message, protocol=4)
    data = _FRAME.pack(len(data)) + data
    while data:
        data = data[os.write(fd, data) :]


class JobEnd:
    """How a child's job ended: the results it gave, and the case it died or hung in."""

    def __init__(self, results: dict[int, dict], unstarted: list[Case]) -> None:
        self.results = results
        self.unstarted = unstarted
        self.culprit: Case | None = None
        self.status = ""
        self.error = ""
        self.sample: tuple | None = None

    def failure(self) -> dict[str, Any]:
        """The op_result fields of the culprit's crash or timeout."""
        detail: dict[str, Any] = {}
        seconds = 0.0
        if self.sample is not None:
            number, shapes, seconds = self.sample
            detail = {"sample": number, "shapes": shapes}
        return _result(self.status, self.error, detail, seconds)


def _result(status: str, error: str, detail: dict, seconds: float = 0.0) -> dict[str, Any]:
    return {
        "status": status,
        "error": error,
        "max_abs_err": None,
        "max_rel_err": None,
        "seconds": seconds,
        "samples": 1 if status in (CRASH, TIMEOUT) else 0,
        "detail": detail,
    }


class Job:
    def __init__(self, cases: list[Case], on_end: Callable[[Job, JobEnd], None]) -> None:
        self.cases = cases
        self.on_end = on_end


class _Child:
    def __init__(self, pid: int, fd: int, slot: int, job: Job) -> None:
        self.pid = pid
        self.fd = fd
        self.slot = slot
        self.job = job
        self.by_index = {case.index: case for case in job.cases}
        self.buffer = bytearray()
        self.results: dict[int, dict] = {}
        self.current: Case | None = None
        self.sample: tuple | None = None
        self.since = 0.0


class Pool:
    """Runs cases in batches, ``processes`` children at a time; each result goes to ``emit``."""

    def __init__(
        self,
        processes: int,
        batch_size: int,
        op_timeout_s: float,
        setup: Setup,
        emit: Emit,
    ) -> None:
        self.processes = processes
        self.batch_size = batch_size
        self.op_timeout_s = op_timeout_s
        self.setup = setup
        self.emit = emit
        self.queue: collections.deque[Job] = collections.deque()
        self.children: dict[int, _Child] = {}
        self.free_slots = list(range(processes))
        self.selector = selectors.DefaultSelector()

    def run(self, cases: list[Case]) -> None:
        # The garbage collector of a child would walk (and so write to, and
        # copy) every object it inherited: leave those to the parent.
        gc.freeze()
        # Smaller batches where there are few cases, so that every child gets some.
        size = max(1, min(self.batch_size, -(-len(cases) // self.processes)))
        for start in range(0, len(cases), size):
            self.queue.append(Job(cases[start : start + size], self._batch_ended))
        try:
            while self.queue or self.children:
                while self.queue and self.free_slots:
                    self._start(self.queue.popleft(), self.free_slots.pop(0))
                for key, _ in self.selector.select(self._wait_s()):
                    self._read(key.data)
                self._stop_hung()
        finally:
            self._kill_all()
            self.selector.close()

    # -- children ---------------------------------------------------------------------------

    def _start(self, job: Job, slot: int) -> None:
        read_fd, write_fd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            die_with_parent(parent)
            self._child_main(job, slot, write_fd)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        child = _Child(pid, read_fd, slot, job)
        self.children[pid] = child
        self.selector.register(read_fd, selectors.EVENT_READ, child)

    def _child_main(self, job: Job, slot: int, fd: int) -> None:
        code = 0
        try:
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, signal.SIG_DFL)

            def report(index: int, number: int, shapes: list) -> None:
                _send(fd, ("sample", index, number, shapes))

            try:
                run_case = self.setup(slot, report)
            except BaseException:
                traceback.print_exc()
                code = _SETUP_FAILED
                return
            for case in job.cases:
                _send(fd, ("start", case.index))
                try:
                    result = run_case(case)
                except Exception as exc:  # the harness's own failure, kept as this case's error
                    traceback.print_exc()
                    result = _result(ERROR, f"internal: {type(exc).__name__}: {exc}", {})
                _send(fd, ("done", case.index, result))
        except BrokenPipeError:
            code = 1  # the runner is gone: nobody is left to tell
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def _read(self, child: _Child) -> None:
        ended = False
        while True:
            try:
                data = os.read(child.fd, 1 << 16)
            except BlockingIOError:
                break
            if not data:
                ended = True
                break
            child.buffer += data
        while len(child.buffer) >= _FRAME.size:
            (length,) = _FRAME.unpack_from(child.buffer)
            if len(child.buffer) < _FRAME.size + length:
                break
            frame = bytes(child.buffer[_FRAME.size : _FRAME.size + length])
            message = pickle.loads(frame)  # noqa: S301 - from our own child
            del child.buffer[: _FRAME.size + length]
            self._message(child, message)
        if ended:
            # Only once what it said before it ended is heard: a child that finished its
            # batch while the runner was busy left its last results and its end together.
            self._reap(child)

    def _message(self, child: _Child, message: tuple) -> None:
        kind, index = message[0], message[1]
        now = time.monotonic()
        if kind == "start":
            child.current, child.sample, child.since = child.by_index[index], None, now
        elif kind == "sample":
            # Each sample gets op_timeout_s of its own.
            child.sample, child.since = (message[2], message[3], 0.0), now
        else:
            child.results[index] = message[2]
            child.current = None

    def _wait_s(self) -> float:
        deadlines = [
            child.since + self.op_timeout_s
            for child in self.children.values()
            if child.current is not None
        ]
        if not deadlines:
            return _POLL_S
        return max(0.0, min(min(deadlines) - time.monotonic(), _POLL_S))

    def _stop_hung(self) -> None:
        now = time.monotonic()
        for child in list(self.children.values()):
            if child.current is not None and now - child.since > self.op_timeout_s:
                os.kill(child.pid, signal.SIGKILL)
                self._reap(child, timed_out=now - child.since)

    def _reap(self, child: _Child, timed_out: float | None = None) -> None:
        self.selector.unregister(child.fd)
        os.close(child.fd)
        _, status = os.waitpid(child.pid, 0)
        del self.children[child.pid]
        self.free_slots.append(child.slot)
        job = child.job
        unstarted = [
            case
            for case in job.cases
            if case.index not in child.results and case is not child.current
        ]
        end = JobEnd(child.results, unstarted)
        clean = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        if child.current is None and unstarted and not clean:
            # Died between cases (its set-up, or our own code): blame the next one,
            # so that a child that always dies cannot stall the run.
            child.current = unstarted.pop(0)
        if child.current is not None:
            end.culprit = child.current
            if timed_out is not None:
                end.status, end.error = timeout_status(self.op_timeout_s)
            else:
                end.status, end.error = death_status(status)
            if child.sample is not None:
                seconds = timed_out if timed_out is not None else time.monotonic() - child.since
                end.sample = (child.sample[0], child.sample[1], seconds)
        job.on_end(job, end)

    def _kill_all(self) -> None:
        for child in list(self.children.values()):
            try:
                os.kill(child.pid, signal.SIGKILL)
                os.waitpid(child.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            os.close(child.fd)
        self.children.clear()

    # -- what a job's end means ---------------------------------------------------------------

    def _emit_all(self, cases: list[Case], results: dict[int, dict]) -> None:
        for case in cases:
            if case.index in results:
                self.emit(case, results[case.index])

    def _batch_ended(self, job: Job, end: JobEnd) -> None:
        if end.unstarted:
            self.queue.appendleft(Job(end.unstarted, self._batch_ended))
        culprit = end.culprit
        earlier = [case for case in job.cases if case.index in end.results]
        if culprit is None or end.status == TIMEOUT or not earlier:
            self._emit_all(earlier, end.results)
            if culprit is not None:
                self.emit(culprit, end.failure())
            return

        def alone_ended(_: Job, alone: JobEnd) -> None:
            if alone.culprit is culprit and alone.status == CRASH:
                self._emit_all(earlier, end.results)
                self.emit(culprit, alone.failure())
                return
            result = alone.failure() if alone.culprit is culprit else alone.results[culprit.index]
            _Bisection(self, culprit, result, end, earlier).next()

        # Did it crash by itself, or because of a case before it in that child?
        self.queue.appendleft(Job([culprit], alone_ended))


class _Bisection:
    """Finds which earlier case made ``victim`` crash, in fresh children, and records it."""

    def __init__(
        self, pool: Pool, victim: Case, alone: dict, crashed: JobEnd, earlier: list[Case]
    ) -> None:
        self.pool = pool
        self.victim = victim
        self.alone = alone
        self.crashed = crashed
        self.held = crashed.results
        self.earlier = earlier
        self.candidates = list(earlier)

    def next(self) -> None:
        if len(self.candidates) == 1:
            self.pool.queue.appendleft(Job([self.candidates[0], self.victim], self._confirmed))
            return
        half = self.candidates[: len(self.candidates) // 2]
        self.pool.queue.appendleft(Job([*half, self.victim], self._halved))

    def _victim_crashed(self, end: JobEnd) -> bool:
        return end.culprit is self.victim and end.status == CRASH

    def _halved(self, job: Job, end: JobEnd) -> None:
        half = job.cases[:-1]
        self.candidates = half if self._victim_crashed(end) else self.candidates[len(half) :]
        self.next()

    def _confirmed(self, job: Job, end: JobEnd) -> None:
        victim, alone = self.victim, dict(self.alone)
        how = self.crashed.error.replace("the process was ", "")
        if self._victim_crashed(end):
            culprit = self.candidates[0]
            corrupted = dict(self.held[culprit.index])
            corrupted.update(
                status=CRASH,
                error=f"corrupts the process for later ops: {victim.label()} run after it "
                f"in the same process crashed ({how})",
                max_abs_err=None,
                max_rel_err=None,
            )
            corrupted["detail"] = dict(corrupted["detail"], victim=victim.row())
            self.held[culprit.index] = corrupted
            alone["detail"] = dict(alone["detail"], crashed_after=culprit.row())
        else:
            alone["detail"] = dict(
                alone["detail"],
                crashed_after="earlier ops in the same process, no single one of them",
            )
        self.pool._emit_all(self.earlier, self.held)
        self.pool.emit(victim, alone)
