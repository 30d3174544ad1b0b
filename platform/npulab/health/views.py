"""The host page's drain and undrain buttons (POST forms; the API has the same actions)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from npulab.accounts.roles import NOT_AN_OPERATOR, is_operator
from npulab.core.errors import Conflict
from npulab.health.services import (
    MAX_NOTE_CHARS,
    do_clear_device,
    do_drain_host,
    do_undrain_host,
)
from npulab.hosts.models import Host


def _operator_host(request: HttpRequest, name: str) -> Host:
    host = get_object_or_404(Host, name=name)
    if not is_operator(request.user):
        raise PermissionDenied(NOT_AN_OPERATOR)
    return host


@login_required
@require_POST
def host_drain(request: HttpRequest, name: str) -> HttpResponse:
    host = _operator_host(request, name)
    note = request.POST.get("note", "").strip()
    if not note:
        messages.error(request, "Say why the host is drained: the note is required.")
        return redirect(host)
    if len(note) > MAX_NOTE_CHARS:
        messages.error(request, f"The note is longer than {MAX_NOTE_CHARS} characters.")
        return redirect(host)
    try:
        do_drain_host(host, request.user, note)
    except Conflict as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{host.name} is drained: no new run goes there.")
    return redirect(host)


@login_required
@require_POST
def host_undrain(request: HttpRequest, name: str) -> HttpResponse:
    host = _operator_host(request, name)
    try:
        do_undrain_host(host, request.user, request.POST.get("note", "")[:MAX_NOTE_CHARS])
    except Conflict as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{host.name} is no longer drained.")
    return redirect(host)


@login_required
@require_POST
def host_device_clear(request: HttpRequest, name: str, index: int) -> HttpResponse:
    host = _operator_host(request, name)
    try:
        do_clear_device(host, index, request.user, request.POST.get("note", "")[:MAX_NOTE_CHARS])
    except Conflict as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Device {index} of {host.name} is back in service.")
    return redirect(host)
