"""What the collectives kind shows: bus bandwidth by collective and message size, and its peaks
as the numbers the upgrade review puts side by side under the old and the new stack."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from npulab.runs.kinds import HeadlinePanel, RunKind
from npulab.runs.models import Run, RunEvent
from workers.kinds.collectives import BUSBW, OPS


class CollectivesKind(RunKind):
    def review_group(self, run: Run) -> str:
        """Bandwidth means something only for as many ranks on as many hosts."""
        return f"{run.shape} ({run.world_size} ranks)"


def busbw_table(run: Run) -> dict[str, Any]:
    """Rows of message sizes, a column per collective: its bus bandwidth in GB/s."""
    cells: dict[int, dict[str, float]] = defaultdict(dict)
    for data in RunEvent.objects.filter(run=run, type=BUSBW).values_list("data", flat=True):
        cells[data["bytes"]][data["op"]] = data["busbw_gbps"]
    ops = [op for op in OPS if any(op in row for row in cells.values())]
    return {
        "busbw_ops": ops,
        "busbw_rows": [
            {"bytes": size, "values": [cells[size].get(op) for op in ops]} for size in sorted(cells)
        ],
    }


COLLECTIVES = CollectivesKind(
    "collectives",
    headline=HeadlinePanel("collectives/partials/busbw.html", busbw_table),
    headline_keys=frozenset(f"{op}_busbw_peak_gbps" for op in OPS),
)
