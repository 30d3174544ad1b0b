"""MindSpore's own words in a failed run's stderr: a graph compile error and where it is.

A Graph mode compile error is a Python exception (``RuntimeError: Unsupported
expression 'Set'.``) followed by MindSpore's trace of the network's construct code,
each frame a ``# In file PATH:LINE[~LINE], COLUMNS`` line and the source line below
it. The last frame is the failing line of the script; the run's reason names it.
Standard library only, Python 3.8.
"""

from __future__ import annotations

import re
from typing import Iterable

from workers.tracebacks import exception_line

# MindSpore's header above the construct code's frames.
CONSTRUCT_TRACE = "The Traceback of Net Construct Code"
_FRAME = re.compile(r"^# In file (?P<path>.+?):(?P<line>\d+)(?:~\d+)?(?:, [\d~]+)?\s*$")


def graph_compile_error(lines: Iterable[str]) -> str:
    """``graph compile error: <exception> at <script>:<line>: <source>``; "" if none."""
    lines = [line.rstrip("\r\n") for line in lines]
    if not any(CONSTRUCT_TRACE in line for line in lines):
        return ""
    where = ""
    for index, line in enumerate(lines):
        match = _FRAME.match(line.strip())
        if match:
            source = lines[index + 1].strip() if index + 1 < len(lines) else ""
            where = f"{match.group('path')}:{match.group('line')}" + (
                f": {source}" if source else ""
            )
    error = exception_line(lines) or "the network did not compile"
    return f"graph compile error: {error}" + (f" at {where}" if where else "")
