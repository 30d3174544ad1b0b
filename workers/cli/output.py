"""What the CLI prints: tables and colours for people, JSON for scripts.

Colours only on a terminal (click strips them from pipes and files) and never
under ``NO_COLOR``. The progress line is redrawn in place on a terminal and
written once per change elsewhere, so a CI log gets a readable history of a
run instead of a thousand carriage returns.
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any, Callable, Sequence

import click

STATUS_COLOURS = {
    "succeeded": "green",
    "pass": "green",
    "go": "green",
    "failed": "red",
    "fail": "red",
    "lost": "red",
    "expired": "red",
    "no-go": "red",
    "cancelled": "yellow",
    "skip": "yellow",
    "caution": "yellow",
    "running": "cyan",
    "dispatched": "cyan",
    "queued": "blue",
    "online": "green",
    "offline": "red",
}
SPINNER = "|/-\\"


def colour_enabled(stream: IO[str] | None = None) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


def styled(text: str, colour: str | None = None, bold: bool = False) -> str:
    if not colour_enabled():
        return text
    return click.style(text, fg=colour, bold=bold)


def status(text: str | None) -> str:
    """A status word, coloured by what it means."""
    text = text or ""
    return styled(text, STATUS_COLOURS.get(text))


def emit_json(data: Any) -> None:
    """One JSON document on stdout, for ``--json``."""
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ",".join(cell(item) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{key}={cell(item)}" for key, item in value.items())
    return str(value)


def table(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[tuple[str, str]],
    colour: dict[str, Callable[[str], str]] | None = None,
) -> str:
    """Left-aligned columns; ``columns`` are (key, heading); ``colour`` styles a column's cells.

    Widths are measured before styling, so escape codes never shift a column.
    """
    colour = colour or {}
    texts = [[cell(row.get(key)) for key, _ in columns] for row in rows]
    widths = [
        max([len(heading)] + [len(line[i]) for line in texts])
        for i, (_, heading) in enumerate(columns)
    ]
    lines = ["  ".join(h.upper().ljust(w) for (_, h), w in zip(columns, widths)).rstrip()]
    for line in texts:
        parts = []
        for (key, _), text, width in zip(columns, line, widths):
            padded = text.ljust(width)
            parts.append(colour[key](text) + padded[len(text) :] if key in colour else padded)
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def fields(pairs: Sequence[tuple[str, Any]]) -> str:
    """``key: value`` lines with the keys aligned; empty values left out."""
    shown = [(key, value) for key, value in pairs if value not in (None, "", [], {})]
    width = max((len(key) for key, _ in shown), default=0)
    return "\n".join(f"{(key + ':').ljust(width + 1)} {value}" for key, value in shown)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def percent(change: float | None) -> str:
    return "" if change is None else f"{change:+.1%}"


class Progress:
    """The one-line indicator shown while the CLI waits for a run, on stderr."""

    def __init__(self, enabled: bool = True, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.live = enabled and bool(getattr(self.stream, "isatty", lambda: False)())
        self._last = ""
        self._tick = 0
        self._drawn = False

    def update(self, text: str, key: str | None = None) -> None:
        """Redraw, or off a terminal print ``text`` when ``key`` (default: the text) changed."""
        if not self.enabled:
            return
        if self.live:
            self._tick += 1
            frame = SPINNER[self._tick % len(SPINNER)]
            width = _terminal_width()
            click.echo(f"\r\x1b[2K{frame} {text}"[: width + 5], file=self.stream, nl=False)
            self._drawn = True
        elif (key if key is not None else text) != self._last:
            click.echo(text, file=self.stream)
        self._last = key if key is not None else text

    def clear(self) -> None:
        """Take the live line away before other output (a log line, the result)."""
        if self.live and self._drawn:
            click.echo("\r\x1b[2K", file=self.stream, nl=False)
            self._drawn = False


def _terminal_width() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        return 100
