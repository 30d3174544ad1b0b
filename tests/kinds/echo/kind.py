"""The echo kind's web side: its words go to its own table and into a panel."""

from __future__ import annotations

from typing import Any

from npulab.runs.events import Batch
from npulab.runs.kinds import Panel, RunKind
from npulab.runs.models import Run
from tests.kinds.echo.models import EchoWord


def on_echo(batch: Batch, event: dict[str, Any]) -> bool:
    EchoWord.objects.create(run=batch.run, index=event["index"], word=event["word"][:200])
    return True  # stored in its own table: no RunEvent row


def words_panel(run: Run) -> dict[str, Any]:
    return {"echo_words": list(run.echo_words.all())}


ECHO_KIND = RunKind("echo", panels=(Panel("echo/partials/words.html", words_panel),))
