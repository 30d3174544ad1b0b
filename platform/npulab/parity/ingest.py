"""The parity kind's ``parity_layer`` events: a row each, in bulk."""

from __future__ import annotations

from typing import Any

from npulab.core.text import storable
from npulab.parity.models import MAX_NAME_CHARS, MAX_SHAPE_CHARS, ParityLayer
from npulab.runs.events import Batch, MalformedEvent
from npulab.runs.models import Run
from workers.kinds.parity import MAX_LAYERS

_PENDING = "parity.layers"
_NUMBERS = (
    "cosine",
    "euc_dist",
    "max_abs_err",
    "max_rel_err",
    "one_thousandth_ratio",
    "five_thousandth_ratio",
)
MAX_FRAMES = 20
MAX_FRAME_CHARS = 500


def _strings(value: Any, count: int, chars: int) -> list[str]:
    # Only strings, bounded: the rest of a hostile line is dropped.
    return [storable(item)[:chars] for item in (value or [])[:count] if isinstance(item, str)]


def on_layer(batch: Batch, data: dict[str, Any]) -> bool:
    index = data["index"]
    if not 0 <= index < MAX_LAYERS:
        raise MalformedEvent(f"parity_layer.index must be 0 to {MAX_LAYERS - 1}")
    batch.pending(_PENDING, _insert).append(
        ParityLayer(
            run=batch.run,
            attempt=batch.run.attempt,
            index=index,
            name=storable(data["name"])[:MAX_NAME_CHARS],
            dtype_a=storable(str(data.get("dtype_a", "")))[:40],
            dtype_b=storable(str(data.get("dtype_b", "")))[:40],
            shape_a=storable(str(data.get("shape_a", "")))[:MAX_SHAPE_CHARS],
            shape_b=storable(str(data.get("shape_b", "")))[:MAX_SHAPE_CHARS],
            broken=_strings(data.get("broken"), 10, 40),
            nan=bool(data.get("nan", False)),
            stack=_strings(data.get("stack"), MAX_FRAMES, MAX_FRAME_CHARS),
            **{key: data.get(key) for key in _NUMBERS},
        )
    )
    return True


def _insert(run: Run, rows: list[ParityLayer]) -> None:
    # A batch delivered twice (a forwarder resync) must not fail on rows already in.
    ParityLayer.objects.bulk_create(rows, batch_size=1000, ignore_conflicts=True)
