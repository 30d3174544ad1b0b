"""The run list's filters and text search, read from the URL so a view can be bookmarked."""

from __future__ import annotations

from collections.abc import Mapping

from django.db.models import Q, QuerySet, TextField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from npulab.runs.models import Run

FILTERS = ("q", "status", "kind", "host", "project", "category")
# A search term this long is no run's name: refuse to scan every spec with it.
MAX_QUERY = 200


def filters_from(params: Mapping[str, str]) -> dict[str, str]:
    found = {key: (params.get(key) or "").strip() for key in FILTERS}
    found["q"] = found["q"][:MAX_QUERY]
    return found


def apply(runs: QuerySet[Run], filters: Mapping[str, str]) -> QuerySet[Run]:
    """``runs`` narrowed to what ``filters`` ask; an empty value asks nothing."""
    if filters.get("status"):
        runs = runs.filter(status=filters["status"])
    if filters.get("kind"):
        runs = runs.filter(kind=filters["kind"])
    if filters.get("host"):
        runs = runs.filter(host__name=filters["host"])
    if filters.get("project"):
        runs = runs.filter(project__slug=filters["project"])
    if filters.get("category"):
        # The diagnosis category of a failed run (docs/diagnosis.md).
        runs = runs.filter(diagnosis_category=filters["category"])
    if filters.get("q"):
        runs = search(runs, filters["q"])
    return runs


def search(runs: QuerySet[Run], text: str) -> QuerySet[Run]:
    """Runs whose name, entry, arguments or tags contain ``text``, ignoring case.

    Only those fields: a spec's env may hold secrets, and a search must not tell whether
    some value is in one.
    """
    runs = runs.annotate(
        search_entry=KT("spec__entry"),
        search_args=Cast(KT("spec__args"), TextField()),
        search_tags=Cast("tags", TextField()),
    )
    return runs.filter(
        Q(name__icontains=text)
        | Q(search_entry__icontains=text)
        | Q(search_args__icontains=text)
        | Q(search_tags__icontains=text)
    )
