"""A run kind that exists only in the tests: it proves a kind is a plug-in.

Nothing generic names it. ``NPULAB_KINDS`` brings in this declaration (as it
would a site's own kind), ``tests.kinds.echo`` is its web app in the test
settings, ``runner.py`` runs it on a host. It echoes its words as ``echo``
events, which its web side stores in a table of its own and shows in a panel.
"""

from __future__ import annotations

from workers.contract.events import EventType
from workers.contract.exits import Cause
from workers.contract.kinds import Kind
from workers.contract.spec import Field, common_fields

ECHO = "echo"
# The runner refuses the word "refuse": a cause only this kind reports.
REFUSED = "echo_refused"
REFUSED_WORD = "refuse"

KIND = Kind(
    "echo",
    "Echo: writes each of its words as an event (a test-only kind).",
    "tests.kinds.echo.runner",
    [
        *common_fields(default_timeout_s=60),
        Field("words", "strings", default=["hello", "world"], help="Words to echo."),
        Field("repeat", "integer", default=1, minimum=1, maximum=10, help="Times each word."),
        Field(
            "hold_s",
            "number",
            default=0,
            minimum=0,
            maximum=3600,
            help="Seconds it stays running after its words: a run that lasts until stopped.",
        ),
    ],
    causes=(Cause(REFUSED, "Refused to echo"),),
    event_types=(EventType(ECHO, {"word": ("string",), "index": ("integer",)}, ("word", "index")),),
)
