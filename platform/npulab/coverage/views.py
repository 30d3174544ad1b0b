"""Pages of a coverage run: the matrix, one cell's detail, and a comparison with a baseline."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from npulab.coverage import compare as cell_compare
from npulab.coverage.matrix import cell, matrix, progress
from npulab.runs.access import run_for, visible_runs
from npulab.runs.models import Run
from workers.kinds.coverage import FORWARD, PASSES, STATUSES
from workers.kinds.coverage import KIND as COVERAGE_KIND

# Rows of the groups that are usually long (unchanged) are listed up to this many.
MAX_LISTED = 500
RECENT_BASELINES = 30


def _coverage_run(user: Any, pk: int) -> Run:
    run = run_for(user, pk, Run.objects.select_related("host", "snapshot", "project"))
    if run.kind != COVERAGE_KIND.name:
        raise Http404("not a coverage run")
    return run


@login_required
def matrix_page(request: HttpRequest, pk: int) -> HttpResponse:
    run = _coverage_run(request.user, pk)
    phase = request.GET.get("pass", FORWARD)
    status = request.GET.get("status", "")
    filters = {
        "pass": phase if phase in PASSES else FORWARD,
        "status": status if status in STATUSES else "",
        "q": request.GET.get("q", "")[:200],
        "family": request.GET.get("family", "")[:100],
    }
    context = {
        "run": run,
        "matrix": matrix(run, filters["pass"], filters["status"], filters["q"], filters["family"]),
        "coverage": progress(run),
        "filters": filters,
        "statuses": STATUSES,
    }
    if request.htmx and request.htmx.target == "matrix":
        return render(request, "coverage/partials/matrix.html", context)
    return render(request, "coverage/matrix.html", context)


@login_required
def cell_page(request: HttpRequest, pk: int) -> HttpResponse:
    run = _coverage_run(request.user, pk)
    results = cell(
        run, request.GET.get("op", ""), request.GET.get("variant", ""), request.GET.get("dtype", "")
    )
    if not results:
        raise Http404("no such cell")
    return render(request, "coverage/partials/cell.html", {"run": run, "results": results})


@login_required
def compare_page(request: HttpRequest, pk: int) -> HttpResponse:
    run = _coverage_run(request.user, pk)
    asked = request.GET.get("baseline", "")
    comparison = None
    try:
        baseline = cell_compare.resolve_baseline(run, asked, visible_runs(request.user))
    except (cell_compare.BaselineInvalid, cell_compare.NoBaseline) as exc:
        messages.error(request, str(exc))
    else:
        comparison = cell_compare.compare(baseline, run)
    others = (
        visible_runs(request.user)
        .filter(kind=run.kind, device_type=run.device_type)
        .exclude(pk=run.pk)
        .exclude(status__in=Run.ACTIVE)
        .select_related("host", "snapshot")
        .order_by("-id")[:RECENT_BASELINES]
    )
    context = {
        "run": run,
        "comparison": comparison,
        "asked": asked or cell_compare.KNOWN_GOOD,
        "known_good": cell_compare.KNOWN_GOOD,
        "others": list(others),
        "groups": [
            (group, comparison.groups[group][:MAX_LISTED], len(comparison.groups[group]))
            for group in cell_compare.GROUPS
        ]
        if comparison
        else [],
    }
    return render(request, "coverage/compare.html", context)
