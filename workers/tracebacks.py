"""Finding the exception a Python process died of in its stderr.

A failed run's banner should say ``ModuleNotFoundError: No module named
'mymodel'``, not "exited with code 1": the supervisor and the training runner
keep the tail of the stderr they relay and ask this module for the line that
names the exception. Standard library only; Python 3.8.
"""

from __future__ import annotations

from typing import Iterable

from workers.contract.events import RANK_PREFIX

TRACEBACK_HEADER = "Traceback (most recent call last):"
# torchrun's own error after a rank failed; the rank's exception says more.
_LAUNCHER_ERRORS = ("torch.distributed.elastic.",)


def exception_line(lines: Iterable[str]) -> str:
    """The ``Type: message`` line of the last traceback in ``lines``; "" if there is none.

    That is the first unindented line after a traceback's header: the
    frames and source lines between are indented. With chained exceptions
    the last one wins, since it is the one the process died of.
    """
    found = ""
    fallback = ""
    in_traceback = False
    for raw in lines:
        line = RANK_PREFIX.sub("", raw.rstrip("\r\n"))
        if line.startswith(TRACEBACK_HEADER):
            in_traceback = True
        elif in_traceback and line and not line[0].isspace():
            in_traceback = False
            if line.startswith(_LAUNCHER_ERRORS):
                fallback = line.strip()
            else:
                found = line.strip()
    return found or fallback
