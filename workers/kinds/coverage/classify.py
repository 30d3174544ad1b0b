"""How one case ended, from what happened when it ran: an exception, a warning, a dead child."""

from __future__ import annotations

import os
import re
import signal
from typing import Any, Sequence

from workers.kinds.coverage import CRASH, ERROR, STATUSES, TIMEOUT, UNSUPPORTED

# An error text is kept, not a whole traceback or a dispatcher's list of backends.
MAX_ERROR_CHARS = 500
# The messages of a kernel that does not exist for this dtype or this backend.
_UNSUPPORTED = re.compile(
    r"not implemented for '|Could not run '.*' with arguments from the '.*' backend"
)
# torch_npu (like MPS) warns when an op it lacks runs on the CPU instead, e.g.
# "The operator 'aten::x' is not currently supported on the NPU backend and
# will fall back to run on the CPU."
_FALLBACK = re.compile(r"fall(s|ing)?[ -]?back to (run on )?(the )?cpu", re.IGNORECASE)
_RANK = {status: rank for rank, status in enumerate(STATUSES)}


def rank(status: str) -> int:
    """Where a status stands, best (0, pass) to worst (timeout)."""
    return _RANK[status]


def _cut(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def exception_status(exc: BaseException) -> tuple[str, str]:
    """``unsupported`` for a missing kernel, else ``error``; and the text to keep."""
    message = str(exc).strip()
    lines = [line.strip() for line in message.splitlines() if line.strip()] or [""]
    name = type(exc).__name__
    for line in lines:
        if _UNSUPPORTED.search(line):
            # The line that names the kernel says more than the dispatcher's backend list after it.
            return UNSUPPORTED, _cut(f"{name}: {line}")
    if isinstance(exc, NotImplementedError):
        return UNSUPPORTED, _cut(f"{name}: {lines[-1]}")
    return ERROR, _cut(f"{name}: {lines[-1]}")


def fallback_warning(messages: Sequence[Any]) -> str | None:
    """The text of the first CPU-fallback warning among those an op raised, if any."""
    for message in messages:
        text = str(getattr(message, "message", message))
        if _FALLBACK.search(text):
            return _cut(text.strip())
    return None


def death_status(wait_status: int) -> tuple[str, str]:
    """``crash`` and how the child died, from its ``os.waitpid`` status."""
    if os.WIFSIGNALED(wait_status):
        return CRASH, f"the process was killed by {signal_name(os.WTERMSIG(wait_status))}"
    return CRASH, f"the process exited with code {os.WEXITSTATUS(wait_status)}"


def timeout_status(seconds: float) -> tuple[str, str]:
    return TIMEOUT, f"no result after {seconds:g} s: the process was killed"


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
