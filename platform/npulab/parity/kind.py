"""What the parity kind shows and gives: its layers and loss curves on the run page, and the
numbers the upgrade review compares per stack."""

from __future__ import annotations

from typing import Any

from npulab.parity.reports import int8_bars, loss_chart, sides, table
from npulab.runs.kinds import Headline, HeadlinePanel, RunKind
from npulab.runs.models import Run

HEADLINES = frozenset(
    {
        "min_cosine",
        "broken_layers",
        "nan_layers",
        "loss_max_rel_diff",
        "int8_delta",
        "int8_delta_kept",
    }
)
LOWER_IS_BETTER = frozenset({"broken_layers", "nan_layers", "loss_max_rel_diff"})


class ParityKind(RunKind):
    def review_group(self, run: Run) -> str:
        """Parity means something only for the same script and the same two sides; the run's
        stack is side B's (its host's), so side A on a host of its own, a reference, names its
        stack too: runs against different references do not compare."""
        spec = run.spec
        named = []
        for name in ("a", "b"):
            side = spec.get(name) or {}
            amp = side.get("amp_level", "O0")
            named.append(f"{side.get('dtype', '')}{'' if amp == 'O0' else '/' + amp}")
        group = f"{spec.get('entry', '')} · {' vs '.join(named)}"
        if run.placement_rules:
            reference = sides(run)["a"]
            group += f" · side A on {reference['stack_text'] or reference['host'] or '?'}"
        return group

    def headlines(self, run: Run) -> dict[str, Headline]:
        """The smallest cosine, the layers that broke a threshold or held NaN, and the loss
        curves' largest relative difference: a diverged run gives them too, since its
        divergence is the evidence."""
        summary = run.result.get("summary") or {}
        values: dict[str, Any] = {
            "min_cosine": summary.get("min_cosine"),
            "broken_layers": summary.get("broken_layers"),
            "nan_layers": summary.get("nan_layers"),
            "loss_max_rel_diff": (summary.get("loss") or {}).get("max_rel_diff"),
            # The task metric's change under INT8 (negative: worse), and with the layers
            # the run names kept in float32.
            "int8_delta": (summary.get("int8") or {}).get("delta"),
            "int8_delta_kept": (summary.get("int8") or {}).get("delta_kept"),
        }
        return {
            key: Headline(float(value), lower_is_better=key in LOWER_IS_BETTER)
            for key, value in values.items()
            if isinstance(value, int | float) and not isinstance(value, bool)
        }


def parity_panel(run: Run) -> dict[str, Any]:
    return {
        "parity": table(run),
        "parity_loss": loss_chart(run),
        "parity_int8": int8_bars(run),
        "parity_sides": sides(run),
    }


PARITY = ParityKind(
    "parity",
    # What a parity run is for leads its page: the verdict per layer, the curves, INT8.
    headline=HeadlinePanel("parity/partials/layers.html", parity_panel),
    headline_keys=HEADLINES,
    lower_is_better=LOWER_IS_BETTER,
)
