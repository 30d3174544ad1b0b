"""MindSpore's own words in a failed run's stderr: a graph compile error and where it is.

A Graph mode compile error is a Python exception (``RuntimeError: Unsupported
expression 'Set'.``) followed by MindSpore's trace of the network's construct code,
outermost frame first, each a ``# In file PATH:LINE[~LINE], COLUMNS`` line and the
source line below it. MindSpore before 2.4 numbered the frames (``# 0 In file
PATH:LINE``), under "The function call stack (See file '.../analyze_fail.ir' ...)",
and 1.x wrote the line as ``PATH(LINE)``. The failing line of the script is the
innermost frame outside an installed package (a frame inside MindSpore's own ``nn``
code is the library's); the run's reason names it. Standard library only, Python 3.8.
"""

from __future__ import annotations

import re
from typing import Iterable

from workers.tracebacks import exception_line

# MindSpore's headers above the construct code's frames: since 2.1, and (alone) before.
CONSTRUCT_TRACE = "The Traceback of Net Construct Code"
ANALYZE_FAIL_TRACE = "The function call stack (See file '"
_FRAME = re.compile(
    r"^# (?:\d+ )?In file (?P<path>.+?)"
    r"(?::(?P<line>\d+)(?:~\d+)?(?:, [\d~]+)?|\((?P<old_line>\d+)\))\s*$"
)
_INSTALLED = ("/site-packages/", "/dist-packages/")


def graph_compile_error(lines: Iterable[str]) -> str:
    """``graph compile error: <exception> at <script>:<line>: <source>``; "" if none."""
    lines = [line.rstrip("\r\n") for line in lines]
    if not any(CONSTRUCT_TRACE in line or ANALYZE_FAIL_TRACE in line for line in lines):
        return ""
    frames = []
    for index, line in enumerate(lines):
        match = _FRAME.match(line.strip())
        if match:
            source = lines[index + 1].strip() if index + 1 < len(lines) else ""
            path = match.group("path")
            where = f"{path}:{match.group('line') or match.group('old_line')}"
            frames.append((path, where + (f": {source}" if source else "")))
    scripts = [where for path, where in frames if not any(part in path for part in _INSTALLED)]
    where = (scripts or [where for _, where in frames] or [""])[-1]
    error = exception_line(lines) or "the network did not compile"
    return f"graph compile error: {error}" + (f" at {where}" if where else "")
