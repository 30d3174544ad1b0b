from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRefresh

from npulab.accounts.roles import NOT_AN_OPERATOR, is_operator
from npulab.hosts.models import Host
from npulab.snapshots.compatibility import snapshot_compatibility
from npulab.snapshots.diff import diff
from npulab.snapshots.forms import DiffForm, KnownGoodForm
from npulab.snapshots.models import HostVersion, Snapshot
from npulab.snapshots.pages import snapshot_page
from npulab.snapshots.selectors import current_version, history, history_rows
from npulab.snapshots.services import do_mark_known_good, do_request_snapshot, do_unmark_known_good

RECENT_VERSIONS = 20
HISTORY_PAGE = 1000


@login_required
def snapshot_detail(request: HttpRequest, pk: int) -> HttpResponse:
    snapshot = get_object_or_404(Snapshot.objects.select_related("host", "known_good_by"), pk=pk)
    context = {
        "snapshot": snapshot,
        "data": snapshot.data,
        "compatibility": snapshot_compatibility(snapshot.data),
        "known_good_form": KnownGoodForm(initial={"note": snapshot.known_good_note}),
        **snapshot_page.context(snapshot, request.user),
    }
    return render(request, "snapshots/snapshot_detail.html", context)


@login_required
def snapshot_diff(request: HttpRequest) -> HttpResponse:
    form = DiffForm(request.GET or None)
    form.fields["a"].queryset = form.fields["b"].queryset = Snapshot.objects.select_related("host")
    context: dict = {"form": form}
    if form.is_valid():
        a, b = form.cleaned_data["a"], form.cleaned_data["b"]
        context.update({"a": a, "b": b, "changes": diff(a.data, b.data)})
    return render(request, "snapshots/snapshot_diff.html", context)


@login_required
@require_POST
def snapshot_known_good(request: HttpRequest, pk: int) -> HttpResponse:
    snapshot = get_object_or_404(Snapshot, pk=pk)
    if not is_operator(request.user):
        raise PermissionDenied(NOT_AN_OPERATOR)
    if request.POST.get("action") == "unmark":
        do_unmark_known_good(snapshot, by=request.user)
        messages.info(request, f"Snapshot {snapshot.short_hash} is no longer marked known good.")
        return redirect(snapshot)
    form = KnownGoodForm(request.POST)
    if form.is_valid():
        do_mark_known_good(snapshot, request.user, form.cleaned_data["note"])
        messages.success(request, f"Snapshot {snapshot.short_hash} marked known good.")
    else:
        messages.error(request, "; ".join(form.errors.get("note", ["invalid note"])))
    return redirect(snapshot)


@login_required
@require_http_methods(["GET", "POST"])
def host_snapshot_request(request: HttpRequest, name: str) -> HttpResponse:
    """POST asks the host for a snapshot; GET is the host page asking whether it came."""
    host = get_object_or_404(Host, name=name)
    if request.method == "GET":
        if not request.htmx:
            return redirect(host)
        if host.snapshot_requested:
            return render(request, "snapshots/partials/snapshot_request.html", {"host": host})
        return HttpResponseClientRefresh()
    if not is_operator(request.user):
        raise PermissionDenied(NOT_AN_OPERATOR)
    do_request_snapshot(host, by=request.user)
    messages.info(request, f"{host.name} sends a fresh snapshot after its next heartbeat.")
    return redirect(host)


@login_required
def host_history(request: HttpRequest, name: str) -> HttpResponse:
    host = get_object_or_404(Host, name=name)
    page = Paginator(history(host), HISTORY_PAGE).get_page(request.GET.get("page"))
    context = {"host": host, "page": page, "rows": history_rows(page.object_list)}
    return render(request, "snapshots/host_history.html", context)


def host_history_context(host: Host, viewer: Any) -> dict:
    """What the host page shows about its environment: the current snapshot, recent steps."""
    current = current_version(host)
    versions = history(host)
    return {
        "rows": history_rows(versions[:RECENT_VERSIONS]),
        "version_count": versions.count(),
        "current_version": current,
        "compatibility": snapshot_compatibility(current.snapshot.data) if current else None,
        "chips": chips_with_readings(current) if current else [],
    }


def chips_with_readings(version: HostVersion) -> list[dict]:
    """The snapshot's chips with the last upload's readings (temperature, memory in use ...)."""
    readings = {
        (reading.get("npu"), reading.get("chip")): reading
        for reading in version.telemetry.get("chips") or []
    }
    return [
        {**chip, **readings.get((chip.get("npu"), chip.get("chip")), {})}
        for chip in (version.snapshot.data.get("npu") or {}).get("chips") or []
    ]
