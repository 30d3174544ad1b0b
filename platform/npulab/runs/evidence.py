"""Headline numbers any run may carry beyond its kind's: a registry the apps above fill.

A run of any kind can hold evidence that belongs to no kind (its profile's step time,
say). The app that owns it registers a source from its ``AppConfig.ready``; the upgrade
review (and anyone else comparing runs' headlines) asks ``headlines(run)`` beside the
kind's own. The runs app never learns who the sources are, and the apps that read and
fill the registry, side by side above runs, never import each other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from npulab.runs.kinds import Headline

if TYPE_CHECKING:
    from npulab.runs.models import Run

# A source gives the extra headlines of some runs, by run id and key (runs it has none
# for are left out): one call for a whole review's runs, so one query, not one a run.
Source = Callable[[list["Run"]], dict[int, dict[str, Headline]]]

_sources: dict[str, Source] = {}


def register(name: str, source: Source) -> Source:
    """Add (or replace, on a second ready()) the source called ``name``."""
    _sources[name] = source
    return source


def unregister(name: str) -> None:
    _sources.pop(name, None)


def for_runs(runs: list[Run]) -> dict[int, dict[str, Headline]]:
    """Every source's headlines of each of ``runs``, by run id (a run with none is absent).

    The caller merges them under the kind's own: a kind's key of the same name wins.
    """
    found: dict[int, dict[str, Headline]] = {}
    if not runs:
        return found
    for source in _sources.values():
        for run_id, numbers in source(runs).items():
            found.setdefault(run_id, {}).update(numbers)
    return found


def headlines(run: Run) -> dict[str, Headline]:
    """The extra headlines of one run."""
    return for_runs([run]).get(run.pk, {})
