"""Running a device tool with a hard deadline."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess

# The line a vendor tool's failure is best told by ("dcmi module initialize failed. ret is -8005").
_TELLING = re.compile(r"\bret is -?\d+|\berror\b|\bfailed\b|\bnot\b", re.IGNORECASE)
MAX_MESSAGE = 300


class ToolFailed(Exception):
    """The tool is missing, timed out or exited non-zero; the message says which."""

    def __init__(self, message: str, output: str = ""):
        super().__init__(message)
        self.output = output  # what the tool printed, stderr first


class ToolTimedOut(ToolFailed):
    """The tool outlived its deadline (and was killed): it is likely to hang again."""


def run_tool(argv: list[str], timeout_s: float) -> str:
    """The tool's stdout; ToolFailed when it cannot be run, fails or outlives ``timeout_s``.

    The tool runs in a session of its own so that a timeout kills whatever it
    started too: a child holding the pipes open would otherwise keep us waiting.
    """
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolFailed(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    try:
        out, err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill(process)
        raise ToolTimedOut(f"timed out after {timeout_s:g} s") from None
    stdout = out.decode("utf-8", "replace")
    if process.returncode != 0:
        text = err.decode("utf-8", "replace") + "\n" + stdout
        raise ToolFailed(f"exited with {process.returncode}: {telling_line(text)}", text)
    return stdout


def telling_line(text: str) -> str:
    """The line of a tool's output that says best why it failed, shortened."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("#")] or lines
    telling = [line for line in lines if _TELLING.search(line)]
    ret = [line for line in telling if "ret is" in line]
    best = (ret or telling or lines or ["no output"])[-1]
    return best[:MAX_MESSAGE]


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.communicate(timeout=5)
