from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from npulab.accounts.roles import NOT_AN_OPERATOR, is_operator
from npulab.hosts.models import Host
from npulab.hosts.pages import host_page
from npulab.hosts.services import do_accept_host_devices


@login_required
def host_list(request: HttpRequest) -> HttpResponse:
    # The health app's row (its badge in the table) in the same query.
    hosts = Host.objects.select_related("health").annotate(busy_devices=Count("leases"))
    template = "hosts/partials/host_table.html" if request.htmx else "hosts/host_list.html"
    return render(request, template, {"hosts": hosts})


@login_required
def host_detail(request: HttpRequest, name: str) -> HttpResponse:
    host = get_object_or_404(Host, name=name)
    # The runs app replaces the devices with ones that name the run leasing them.
    context = {"host": host, "devices": host.devices, **host_page.context(host, request.user)}
    return render(request, "hosts/host_detail.html", context)


@login_required
@require_POST
def host_accept_devices(request: HttpRequest, name: str) -> HttpResponse:
    """An operator accepts the device type and count the host registered with."""
    host = get_object_or_404(Host, name=name)
    if not is_operator(request.user):
        raise PermissionDenied(NOT_AN_OPERATOR)
    do_accept_host_devices(host, by=request.user)
    messages.info(request, f"{host.name}: {host.device_count} × {host.device_type} accepted.")
    return redirect(host)
