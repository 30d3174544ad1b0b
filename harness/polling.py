"""How the tests and benchmarks pause between polls of what they wait for."""

from __future__ import annotations

from collections.abc import Iterator

FIRST_S = 0.05
MOST_S = 0.5


def pauses(first: float = FIRST_S, most: float = MOST_S) -> Iterator[float]:
    """Pauses between polls: short at first, for what is nearly done, then growing to ``most``.

    A poll of a stack's API is a request its web server answers on the cores that the run
    being waited for needs: at 20 polls a second, the tests' waiting was most of the web
    server's CPU on a 2-core machine, and slowed the runs it waited for.
    """
    pause = first
    while True:
        yield pause
        pause = min(pause * 1.5, most)
