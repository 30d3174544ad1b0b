"""A log line as the log page shows it, and where in a log the first error is.

Lines keep the colours a program printed (ANSI SGR codes) and mark a search's matches;
everything else of the line is text, escaped: a script's output is never markup.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from npulab.runs.models import Run, RunAttempt
from workers.contract.events import RUNNER, STDERR, STDOUT

STREAMS = (STDOUT, STDERR, RUNNER)
# An SGR sequence ("\x1b[1;31m"); any other escape sequence is dropped from the text.
_SGR = re.compile(r"\x1b\[([0-9;]*)m")
_OTHER_ESCAPES = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-z]|\][^\x07]*\x07|[@-Z\\-_])")
_COLOURS = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")
# Where a log says it failed: Python's tracebacks and exceptions, CANN's error codes,
# MindSpore's and the runtime's own levels. Ingestion looks for it in each line (Python's re);
# the migration that numbered the lines stored before searched with it in the database, so
# it is kept to what PostgreSQL's, SQLite's and Python's regular expressions read alike.
FIRST_ERROR = (
    r"(Traceback \(most recent call last\)|Error:|\[ERROR\]|\[EXCEPTION\]"
    r"|E[A-Z][0-9][0-9][0-9][0-9]|ERR[0-9][0-9][0-9][0-9][0-9])"
)


def _classes(codes: str, current: set[str]) -> set[str]:
    found = set(current)
    for code in (codes or "0").split(";"):
        if not code.isdigit():
            continue
        number = int(code)
        if number == 0:
            found = set()
        elif number == 1:
            found.add("ansi-bold")
        elif 30 <= number <= 37 or 90 <= number <= 97:
            found = {name for name in found if not name.startswith("ansi-fg")}
            found.add(f"ansi-fg-{_COLOURS[number % 10]}" + ("-bright" if number >= 90 else ""))
        elif number == 39:
            found = {name for name in found if not name.startswith("ansi-fg")}
    return found


def _highlight(text: str, query: str) -> str:
    if not query:
        return escape(text)
    parts = re.split(f"({re.escape(query)})", text, flags=re.IGNORECASE)
    return "".join(
        f"<mark>{escape(part)}</mark>" if index % 2 else escape(part)
        for index, part in enumerate(parts)
    )


def render_line(line: str, query: str = "") -> SafeString:
    """``line`` as HTML: its ANSI colours as spans, ``query``'s matches marked."""
    html: list[str] = []
    classes: set[str] = set()
    position = 0
    for match in _SGR.finditer(line):
        html.append(_segment(line[position : match.start()], classes, query))
        classes = _classes(match.group(1), classes)
        position = match.end()
    html.append(_segment(line[position:], classes, query))
    return mark_safe("".join(html))  # noqa: S308 - every piece of text is escaped above


def _segment(text: str, classes: set[str], query: str) -> str:
    text = _OTHER_ESCAPES.sub("", text)
    if not text:
        return ""
    body = _highlight(text, query)
    return f'<span class="{" ".join(sorted(classes))}">{body}</span>' if classes else body


@dataclass(frozen=True)
class LineRef:
    line_no: int
    page: int


def first_error(run: Run, attempt: int, page_lines: int) -> LineRef | None:
    """The first line of the attempt's log that looks like an error, and its page.

    Ingestion notes it as the lines come (runs/events.py): no request searches the log.
    """
    line_no = (
        RunAttempt.objects.filter(run=run, number=attempt)
        .values_list("first_error_line", flat=True)
        .first()
    )
    if line_no is None:
        return None
    return LineRef(line_no, (line_no - 1) // page_lines + 1)
