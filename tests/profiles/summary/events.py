"""Small traces written by hand for the summary's tests: complete events and the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def complete(cat: str, name: str, pid: int, tid: int, ts: float, dur: float, **args: Any) -> dict:
    """A Chrome trace ``X`` event."""
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def write_trace(path: Path, events: list[dict], **top: Any) -> Path:
    """``events`` as a Kineto trace at ``path``, with ``top``'s keys beside them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"traceEvents": events, **top}))
    return path
