"""The standalone stack's supervisor: a child that dies comes back, with back-off, or the
stack gives up on one that cannot stay up."""

from __future__ import annotations

import pytest

from npulab.web.stack import GaveUp, Supervisor


class FakeChild:
    """A child whose death the test decides."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.returncode: int | None = None
        self.starts = 0
        self.stops = 0

    def start(self) -> None:
        self.starts += 1
        self.returncode = None

    def stop(self) -> None:
        self.stops += 1


def supervised() -> tuple[Supervisor, FakeChild, list[str]]:
    said: list[str] = []
    child = FakeChild("worker")
    return Supervisor([child], said.append), child, said


def test_a_child_that_was_up_a_while_comes_back_after_a_second_each_time() -> None:
    supervisor, child, said = supervised()
    supervisor._started["worker"] = 0.0
    now = 0.0
    for restarts in range(1, 5):
        now += 61  # up for more than a minute, then killed
        child.returncode = -9
        supervisor.check(now)
        supervisor.check(now + 0.5)
        assert child.starts == restarts - 1  # not yet: the second has not passed
        now += 1
        supervisor.check(now)
        assert child.starts == restarts
    assert child.stops == 4  # the dead one's group is cleaned up before each start
    assert said == ["WARNING worker exited with code -9; restarting in 1 s"] * 4


def test_the_delay_doubles_while_the_child_keeps_dying_and_gives_up_after_five() -> None:
    supervisor, child, said = supervised()
    now = 0.0
    for _ in range(4):
        child.returncode = 1
        supervisor.check(now)
        now += 31
        supervisor.check(now)
        now += 1
    child.returncode = 1
    with pytest.raises(GaveUp, match="worker exited with code 1"):
        supervisor.check(now)
    assert said == [
        f"WARNING worker exited with code 1; restarting in {delay} s" for delay in (1, 2, 4, 8)
    ]
    assert child.starts == 4


def test_a_running_child_is_left_alone() -> None:
    supervisor, child, said = supervised()
    for second in range(100):
        supervisor.check(float(second))
    assert (child.starts, child.stops, said) == (0, 0, [])
