"""The web side of run kinds: what the generic run code asks of a kind.

A kind's app subclasses ``RunKind`` and registers an instance from its
``AppConfig.ready`` (see npulab.smoke, npulab.training). The run page, the
compare page, ingestion, the restart decision and the upgrade review ask
the registry; none of them names a kind. A kind declared in the contract
(``workers.contract.kinds``) without a web app gets the plain ``RunKind``:
the generic page, no restarts, its result summary's numbers as headlines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workers.contract import kinds as contract_kinds
from workers.contract.exits import SUCCEEDED

if TYPE_CHECKING:
    from npulab.runs.models import Run

# A panel's context: what its template needs beyond ``run`` (the page has it).
PanelContext = Callable[["Run"], dict[str, Any]]


@dataclass(frozen=True)
class Panel:
    """A card on a page: its template, and the extra context it needs."""

    template: str
    context: PanelContext | None = None

    def render_context(self, run: Run) -> dict[str, Any]:
        return self.context(run) if self.context else {}


@dataclass(frozen=True)
class HeadlinePanel(Panel):
    """The card a run page leads with, full width, before the run's facts: what runs of the
    kind are for (a training run's curves, a stability run's verdict)."""

    # It draws the run's metric charts itself, so the page does not add its own card below.
    draws_metrics: bool = False


@dataclass(frozen=True)
class ComparePanel:
    """A section of the compare page for runs of one kind."""

    template: str
    context: Callable[[list[Run]], dict[str, Any]] | None = None


@dataclass
class Headline:
    """A number a kind gives the upgrade review for a succeeded run."""

    value: float
    lower_is_better: bool = False


@dataclass
class Comparison:
    """One headline of two runs side by side, and whether the candidate regressed."""

    name: str
    baseline: float | str | None
    candidate: float | str | None
    change: float | None
    lower_is_better: bool
    regression: bool


# A candidate this much worse than its baseline is a regression, unless the caller says.
DEFAULT_THRESHOLD = 0.05


@dataclass
class RunKind:
    """One kind's answers to the generic code; the defaults fit a kind with nothing special."""

    name: str
    # The card the run page leads with; None: the page opens on the run's facts.
    headline: HeadlinePanel | None = None
    # Cards shown on the run page under the run's facts, in this order.
    panels: tuple[Panel, ...] = ()
    # The right-hand card beside the facts lists the steps, even before any arrived.
    reports_steps: bool = False
    # The attempts table is shown even for a run with one attempt.
    shows_attempts: bool = False
    # The spec field that says how many steps a run takes, so its progress reads "step N of
    # it"; None, or 0 in a spec: the run does not say.
    total_steps_field: str | None = None
    compare_panels: tuple[ComparePanel, ...] = ()
    # The summary numbers of a succeeded run that are its headlines; None: every number.
    headline_keys: frozenset[str] | None = None
    # Those where less is better (a loss).
    lower_is_better: frozenset[str] = field(default_factory=frozenset)

    def max_restarts(self, run: Run) -> int:
        """How many automatic restarts the run may have (after restartable causes)."""
        return 0

    def on_finished(self, run: Run) -> None:
        """The run reached its final state (called once its transaction has committed)."""

    def check_submission(self, spec: dict[str, Any]) -> dict[str, str]:
        """What this platform refuses in a valid spec (field -> why): what its settings allow,
        beyond the spec's own rules, which the contract checks on both sides."""
        return {}

    def headlines(self, run: Run) -> dict[str, Headline]:
        """The numbers of a succeeded run that the upgrade review compares across stacks."""
        summary = run.result.get("summary") or {}
        return {
            key: Headline(float(value), lower_is_better=key in self.lower_is_better)
            for key, value in summary.items()
            if isinstance(value, int | float)
            and not isinstance(value, bool)
            and (self.headline_keys is None or key in self.headline_keys)
        }

    def review_group(self, run: Run) -> str:
        """Which runs of this kind the upgrade review compares with each other: those with
        the same group (a training entry and its arguments); '' puts them all together."""
        return ""

    def review_headlines(self, runs: list[Run]) -> dict[int, dict[str, Headline]]:
        """The headlines of succeeded runs of one group, on both sides of a review, by run id.

        A kind whose number needs the whole group (one loss threshold for all) computes it
        here; the default is each run's ``headlines``.
        """
        return {run.pk: self.headlines(run) for run in runs}

    def result_changes(self, baseline: Run, candidate: Run) -> list[Comparison]:
        """What changed between two runs' own results beyond their headlines (an op matrix's
        regressions); the compare API and the upgrade review show these rows too."""
        return []

    def compare(
        self, baseline: Run, candidate: Run, threshold: float = DEFAULT_THRESHOLD
    ) -> list[Comparison]:
        """The candidate against the baseline: how it ended, each common headline, then
        ``result_changes``."""
        rows = [
            Comparison(
                "status",
                baseline.status,
                candidate.status,
                None,
                False,
                baseline.status == SUCCEEDED and candidate.status != SUCCEEDED,
            )
        ]
        before, after = self.headlines(baseline), self.headlines(candidate)
        for key in sorted(before.keys() & after.keys()):
            old, new = before[key].value, after[key].value
            lower = before[key].lower_is_better
            change, worse = judge(old, new, lower, threshold)
            rows.append(Comparison(key, old, new, change, lower, worse))
        return rows + self.result_changes(baseline, candidate)


def judge(
    before: float, after: float, lower_is_better: bool, threshold: float
) -> tuple[float | None, bool]:
    """The change as a fraction of ``before``; whether it is worse by more than ``threshold``."""
    change = (after - before) / abs(before) if before else None
    worse = change is not None and (change > threshold if lower_is_better else change < -threshold)
    return change, worse


class KindNotDeclared(LookupError):
    """A web kind was registered for a name the contract does not declare."""


_registry: dict[str, RunKind] = {}


def register(kind: RunKind) -> RunKind:
    if contract_kinds.get(kind.name) is None:
        raise KindNotDeclared(
            f"run kind {kind.name!r} has a web app but no declaration in workers.contract.kinds"
        )
    _registry[kind.name] = kind
    return kind


def get(name: str) -> RunKind:
    """The web kind of ``name``; a plain one for a declared kind without an app."""
    found = _registry.get(name)
    return found if found is not None else RunKind(name)
