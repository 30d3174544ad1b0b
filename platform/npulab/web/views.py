from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from npulab.hosts.models import Host
from npulab.runs.access import visible_runs
from npulab.runs.models import Run
from npulab.web import morning


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    runs = visible_runs(request.user)
    counts = dict(runs.order_by().values_list("status").annotate(n=Count("id")))
    context = {
        "hosts": Host.objects.annotate(busy_devices=Count("leases")),
        "counts": [(value, label, counts.get(value, 0)) for value, label in Run.Status.choices],
        "in_progress": morning.in_progress(runs),
        "failures": morning.failures(runs),
        "queue": morning.queue_wait(runs),
        "snapshots": morning.newest_snapshots(),
    }
    template = "web/partials/dashboard_body.html" if request.htmx else "web/dashboard.html"
    return render(request, template, context)


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for load balancers and `make run`: the database answers."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})
