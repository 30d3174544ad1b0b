"""How a test waits: on a condition, up to a generous deadline, never for a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.polling import pauses

# In-process waits (a thread, a fake platform); a test that waits on processes it started
# gives its own, longer, deadline: they must hold on a loaded 2-core machine.
DEADLINE_S = 30.0
MOST_POLL_S = 0.25


def wait_until(
    condition: Callable[[], Any], what: str, timeout: float = DEADLINE_S, poll_s: float = 0.02
) -> Any:
    """Poll ``condition`` until it is truthy and return it; fail naming ``what`` after timeout.

    Polls every ``poll_s`` at first, then less often (up to MOST_POLL_S): a condition that
    asks a stack's API costs its web server CPU the awaited run needs.
    """
    deadline = time.monotonic() + timeout
    pause = pauses(poll_s, max(poll_s, MOST_POLL_S))
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(next(pause))


def alive(pid: int) -> bool:
    """Running or stopped; a zombie nobody reaped yet has died.

    An orphan's zombie waits for init to reap it, which takes a while on a loaded machine
    and for ever where PID 1 of a container reaps nothing: ``os.kill(pid, 0)`` would still
    find it.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
