"""The profiles app's pages: the timeline (and the JSON its script reads) and the compare of
two profiles."""

from __future__ import annotations

import math
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse

from npulab.core import errors
from npulab.profiles import timeline
from npulab.profiles.access import visible_profiles
from npulab.profiles.compare import Delta, compare
from npulab.profiles.models import Profile
from npulab.profiles.timeline.store import IndexMissing, local_index

MAX_ID = 2**63
# Rows per table on the compare page (the largest changes); the JSON has them all.
COMPARE_ROWS = 40


def _error(status: int, code: str, detail: str, **fields: Any) -> JsonResponse:
    return JsonResponse({"code": code, "detail": detail, **fields}, status=status)


def _index(profile: Profile) -> str | JsonResponse:
    """The profile's local index path, or the JSON error a script shows."""
    try:
        path = local_index(profile)
        timeline.meta(path)  # an index of another format version is refused here
    except IndexMissing as missing:
        return _error(409, errors.CONFLICT, str(missing))
    except timeline.IndexUnreadable as unreadable:
        return _error(409, errors.CONFLICT, f"{unreadable}: summarise the profile again")
    return path


@login_required
def timeline_page(request: HttpRequest, pk: int) -> HttpResponse:
    profile = get_object_or_404(
        visible_profiles(request.user, Profile.objects.select_related("run", "artifact")), pk=pk
    )
    context: dict[str, Any] = {"profile": profile, "run": profile.run, "problem": ""}
    try:
        path = local_index(profile)
        context["meta"] = timeline.meta(path)
        context["lanes"] = timeline.lanes(path)
        context["span_ms"] = (context["meta"]["t_max"] - context["meta"]["t_min"]) / 1000
    except IndexMissing:
        context["problem"] = (
            f"The timeline is not ready: the profile is {profile.get_status_display().lower()}."
            if profile.status != Profile.Status.FAILED
            else f"The profile could not be read: {profile.error or 'no reason given'}"
        )
    except timeline.IndexUnreadable as unreadable:
        context["problem"] = f"The timeline index cannot be read ({unreadable})."
    at, span = _place(request.GET.get("at"), request.GET.get("span"))
    context["config"] = {
        "window": reverse("profiles:timeline_window", args=[profile.pk]),
        "event": reverse("profiles:timeline_event", args=[profile.pk, 0]),
        "search": reverse("profiles:timeline_search", args=[profile.pk]),
        "at": at,
        "span": span,
        "meta": context.get("meta"),
        "lanes": context.get("lanes") or [],
    }
    return render(request, "profiles/timeline.html", context)


def _place(at: str | None, span: str | None) -> tuple[float | None, float | None]:
    """``?at=<ts_us>&span=<dur_us>`` from a summary's link; nonsense is ignored."""
    values = []
    for raw in (at, span):
        try:
            value = float(raw) if raw not in (None, "") else None
        except ValueError:
            value = None
        values.append(value if value is not None and math.isfinite(value) else None)
    return values[0], values[1] if values[1] and values[1] > 0 else None


@login_required
def timeline_window(request: HttpRequest, pk: int) -> JsonResponse:
    """The events of the window ``start``..``end`` (µs) at ``width`` pixels (``lanes``: ids)."""
    profile = get_object_or_404(visible_profiles(request.user), pk=pk)
    params = request.GET
    try:
        start, end, width, lanes = timeline.parse_window(
            params.get("start"), params.get("end"), params.get("width"), params.get("lanes")
        )
    except timeline.BadWindow as bad:
        return _error(400, errors.INVALID, str(bad), **{bad.field: [str(bad)]})
    path = _index(profile)
    if isinstance(path, JsonResponse):
        return path
    return JsonResponse(timeline.query(path, start, end, width, lanes))


@login_required
def timeline_event(request: HttpRequest, pk: int, event_id: int) -> JsonResponse:
    profile = get_object_or_404(visible_profiles(request.user), pk=pk)
    path = _index(profile)
    if isinstance(path, JsonResponse):
        return path
    found = timeline.event(path, event_id) if event_id < MAX_ID else None
    if found is None:
        return _error(404, errors.NOT_FOUND, f"No event {event_id} in this timeline.")
    return JsonResponse(found)


@login_required
def timeline_search(request: HttpRequest, pk: int) -> JsonResponse:
    profile = get_object_or_404(visible_profiles(request.user), pk=pk)
    path = _index(profile)
    if isinstance(path, JsonResponse):
        return path
    try:
        return JsonResponse(timeline.search(path, request.GET.get("q", "")))
    except timeline.BadWindow as bad:
        return _error(400, errors.INVALID, str(bad), **{bad.field: [str(bad)]})


@login_required
def profile_compare(request: HttpRequest) -> HttpResponse:
    """Profile ``b`` against profile ``a``: step time, then per op and per kernel type."""
    context: dict[str, Any] = {"a": None, "b": None, "problems": [], "comparison": None}
    for side in ("a", "b"):
        raw = request.GET.get(side, "").strip()
        if not raw:
            continue
        if not raw.isdigit() or int(raw) >= MAX_ID:
            context["problems"].append(f"{side}: a profile id is a whole number, not {raw[:40]!r}")
            continue
        found = (
            visible_profiles(request.user, Profile.objects.select_related("run", "run__host"))
            .filter(pk=int(raw))
            .first()
        )
        if found is None:
            context["problems"].append(f"{side}: there is no profile {raw}")
        elif found.status != Profile.Status.READY:
            context["problems"].append(
                f"{side}: profile {raw} is {found.get_status_display().lower()}, not ready"
            )
        context[side] = found
    a, b = context["a"], context["b"]
    status = 400 if context["problems"] else 200
    if a is not None and b is not None and not context["problems"]:
        comparison = compare(a.summary or {}, b.summary or {})
        context["comparison"] = comparison
        context["step"] = _shown(comparison.step)
        context["sections"] = [
            {"id": "kernel-types", "title": "Kernel types", "rows": comparison.kernel_types},
            {"id": "ops", "title": "Operators", "rows": comparison.ops},
            {"id": "kernels", "title": "Kernels", "rows": comparison.kernels},
        ]
        for section in context["sections"]:
            section["more"] = max(0, len(section["rows"]) - COMPARE_ROWS)
            section["rows"] = [_shown(row) for row in section["rows"][:COMPARE_ROWS]]
    ready = Profile.objects.filter(status=Profile.Status.READY).select_related("run")
    context["recent"] = visible_profiles(request.user, ready)[:50]
    context["a_id"] = request.GET.get("a", "")
    context["b_id"] = request.GET.get("b", "")
    return render(request, "profiles/compare.html", context, status=status)


def _shown(row: Delta) -> dict[str, Any]:
    """A delta in milliseconds, for a table."""

    def ms(value: float | None) -> float | None:
        return None if value is None else value / 1000

    return {
        "name": row.name,
        "a_ms": ms(row.a_us),
        "b_ms": ms(row.b_us),
        "delta_ms": ms(row.delta_us),
        "change": row.change,
        "a_count": row.a_count,
        "b_count": row.b_count,
    }
