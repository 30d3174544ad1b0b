"""The fork server on its own: what a child said is heard, however late the runner reads it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.waiting import alive, wait_until
from workers.kinds.coverage import FORWARD, PASS
from workers.kinds.coverage.cases import Case, number
from workers.kinds.coverage.pool import Pool

# A child's batch is milliseconds of work; on a loaded machine its start may take seconds.
DEADLINE_S = 120.0


def test_a_child_that_ended_before_the_runner_read_it_is_no_crash(tmp_path: Path) -> None:
    # The runner is busy (here: handing on the first batch's results) while the other child
    # runs its whole batch and exits: its messages and its end wait in the pipe together.
    # They were read, then the child reaped before its messages were looked at, as if it
    # had died in the middle of its batch: the batch ran again, and a case run again that
    # way could end as a "crash" of a child that had exited with code 0.
    ran = tmp_path / "ran"

    def setup(slot: int, report: Any) -> Any:
        def run_case(case: Case) -> dict[str, Any]:
            with open(ran, "a") as handle:
                handle.write(f"{case.index}\n")
            return {"status": PASS, "error": None, "samples": 1, "detail": {}}

        return run_case

    emitted: list[tuple[int, dict[str, Any]]] = []

    def emit(case: Case, result: dict[str, Any]) -> None:
        if not emitted:
            for child in list(pool.children.values()):
                wait_until(lambda pid=child.pid: not alive(pid), "the other child", DEADLINE_S)
        emitted.append((case.index, result))

    cases = number([Case(f"op{index}", "", "float32", FORWARD, None) for index in range(4)])
    pool = Pool(2, 2, DEADLINE_S, setup, emit)
    pool.run(cases)

    assert sorted(index for index, _ in emitted) == [0, 1, 2, 3]
    assert [result["status"] for _, result in emitted] == [PASS] * 4
    assert all(result["detail"] == {} for _, result in emitted)
    # Each case ran once: no batch was taken for unfinished and run again.
    assert sorted(int(line) for line in ran.read_text().split()) == [0, 1, 2, 3]
