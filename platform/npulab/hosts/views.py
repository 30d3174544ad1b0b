from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from npulab.hosts.models import Host
from npulab.runs.models import Run
from npulab.snapshots.views import host_history_context

RECENT_RUNS = 25


@login_required
def host_list(request: HttpRequest) -> HttpResponse:
    hosts = Host.objects.annotate(busy_devices=Count("leases"))
    template = "hosts/partials/host_table.html" if request.htmx else "hosts/host_list.html"
    return render(request, template, {"hosts": hosts})


@login_required
def host_detail(request: HttpRequest, name: str) -> HttpResponse:
    host = get_object_or_404(Host, name=name)
    leases = {lease.device_index: lease.run for lease in host.leases.select_related("run")}
    devices = [dict(device, run=leases.get(device["index"])) for device in host.devices]
    runs = Run.objects.filter(host=host).select_related("submitted_by")[:RECENT_RUNS]
    context = {"host": host, "devices": devices, "runs": runs, **host_history_context(host)}
    return render(request, "hosts/host_detail.html", context)
