"""The echo kind's runner: no torch, no device work, one event per word."""

from __future__ import annotations

import time

from tests.kinds.echo import ECHO, REFUSED, REFUSED_WORD
from workers.contract import exits
from workers.kinds.base import Outcome, RunContext


def run(ctx: RunContext) -> Outcome:
    words = [word for word in ctx.spec["words"] for _ in range(ctx.spec["repeat"])]
    for index, word in enumerate(words):
        if word == REFUSED_WORD:
            return Outcome(exits.FAILED, f"refused word {index}", {"echoed": index}, REFUSED)
        ctx.events.emit(ECHO, word=word, index=index)
        print(word)
    ctx.events.flush()
    time.sleep(ctx.spec["hold_s"])
    return Outcome(exits.SUCCEEDED, f"echoed {len(words)} words", {"echoed": len(words)})
