"""The stack of a snapshot: the versions an upgrade question is about.

Every ``pip install`` makes a new snapshot, but a run's numbers speak for the
chip, driver, firmware, CANN, Python, torch, torch_npu and mindspore it ran
on, not for the rest of the package set. The upgrade review therefore pools
the runs of every snapshot with the same stack, on any host, and lists the
other differences beside them.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from npulab.snapshots.content import summarize
from npulab.snapshots.models import Snapshot

# In the order a page shows them; labels as people write them.
STACK_FIELDS = (
    ("chip", "chip"),
    ("driver", "driver"),
    ("firmware", "firmware"),
    ("cann", "CANN"),
    ("python", "Python"),
    ("torch", "torch"),
    ("torch_npu", "torch_npu"),
    ("mindspore", "mindspore"),
)
# Summary keys of the stack that are stored flat, so the database can narrow by them.
_SUMMARY_KEYS = ("driver", "firmware", "cann", "python", "torch", "torch_npu", "mindspore")

Stack = dict[str, str | None]


def stack(data: dict[str, Any]) -> Stack:
    """The stack of stable snapshot content (see content.py); None for what is absent."""
    summary = summarize(data)
    return {"chip": chip_models(data), **{key: summary.get(key) for key in _SUMMARY_KEYS}}


def chip_models(data: dict[str, Any]) -> str | None:
    """ "910B3" (or "910B3, 310P3"): the accelerator models, not how many of each.

    A host with eight cards and one with sixteen of the same model share a stack.
    """
    devices = [*(data["npu"].get("chips") or []), *(data["cuda"].get("gpus") or [])]
    names = {str(d.get("name") or "?") for d in devices if isinstance(d, dict)}
    return ", ".join(sorted(names)) or None


def snapshots_with_stack(wanted: Stack) -> list[Snapshot]:
    """Every stored snapshot with exactly this stack, on any host."""
    narrowed: QuerySet[Snapshot] = (
        Snapshot.objects.filter(
            **{f"summary__{key}": wanted.get(key) for key in ("cann", "torch", "torch_npu")}
        )
        .select_related("host")
        .only("id", "data", "host__name")
    )
    return [snapshot for snapshot in narrowed if stack(snapshot.data) == wanted]


def stack_differences(a: Stack, b: Stack) -> list[dict[str, Any]]:
    """The stack parts that differ from ``a`` to ``b``, labelled."""
    return [
        {"name": label, "from": a.get(key), "to": b.get(key)}
        for key, label in STACK_FIELDS
        if a.get(key) != b.get(key)
    ]
