"""The OpenAPI shape of a run submission, generated from the kinds' declarations."""

from __future__ import annotations

import copy
from typing import Any

from npulab.runs.services import MAX_TAG_CHARS, MAX_TAGS, PRIORITY_RANGE
from workers.contract import kinds

_STRINGS = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_CHARS},
    "maxItems": MAX_TAGS,
}

SUBMISSION_PROPERTIES: dict[str, Any] = {
    "host": {
        "type": "string",
        "description": "Run on this host only; omitted or `any`: the scheduler chooses.",
    },
    "labels": dict(_STRINGS, description="Run only on a host that carries all these labels."),
    "name": {"type": "string", "maxLength": 200},
    "tags": dict(_STRINGS, description="Free-form tags for finding the run later."),
    "priority": {
        "type": "integer",
        "minimum": PRIORITY_RANGE[0],
        "maximum": PRIORITY_RANGE[1],
        "default": 0,
        "description": "Higher is placed first; equal priorities in submission order.",
    },
    "wait_for_host": {
        "type": "boolean",
        "default": False,
        "description": (
            "Queue the run even if no registered host could ever take it (too many devices, "
            "a device type, label or host nobody has), until one could; it expires after "
            "NPULAB_QUEUE_EXPIRY_S (24 h). Without it such a run is refused with 400."
        ),
    },
}


def submission_schema() -> dict[str, Any]:
    """A run spec of any kind, plus the queueing fields."""
    variants = []
    for kind in kinds.all_kinds():
        schema = copy.deepcopy(kind.json_schema())
        schema["properties"].update(SUBMISSION_PROPERTIES)
        variants.append(schema)
    return variants[0] if len(variants) == 1 else {"oneOf": variants}
