from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from npulab.hosts.models import Host
from npulab.runs.forms import RunSubmitForm
from npulab.runs.models import Run
from npulab.runs.selectors import can_cancel, log_tail, steps
from npulab.runs.services import Conflict, SubmissionInvalid, do_cancel_run, do_submit_run

RUNS_PER_PAGE = 50


@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    runs = Run.objects.select_related("host", "submitted_by")
    filters = {key: request.GET.get(key, "") for key in ("status", "kind", "host")}
    if filters["status"]:
        runs = runs.filter(status=filters["status"])
    if filters["kind"]:
        runs = runs.filter(kind=filters["kind"])
    if filters["host"]:
        runs = runs.filter(host__name=filters["host"])
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "filters": filters,
        "statuses": Run.Status.choices,
        "kinds": Run.objects.order_by().values_list("kind", flat=True).distinct(),
        "hosts": Host.objects.values_list("name", flat=True),
    }
    template = "runs/partials/run_table.html" if request.htmx else "runs/run_list.html"
    return render(request, template, context)


@login_required
@require_http_methods(["GET", "POST"])
def run_submit(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = RunSubmitForm(request.POST)
        if form.is_valid():
            try:
                run = do_submit_run(request.user, form.document())
            except SubmissionInvalid as error:
                form.add_submission_errors(error)
            else:
                messages.success(request, f"Run #{run.pk} queued.")
                if request.htmx:
                    return HttpResponseClientRedirect(run.get_absolute_url())
                return redirect(run)
    else:
        form = RunSubmitForm(kind=request.GET.get("kind"), initial=_initial(request))
    return render(request, "runs/run_submit.html", {"form": form})


def _initial(request: HttpRequest) -> dict[str, str]:
    return {key: request.GET[key] for key in ("host", "device_type") if key in request.GET}


@login_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("host", "submitted_by", "snapshot"), pk=pk)
    context = {
        "run": run,
        "steps": steps(run),
        "log": log_tail(run),
        "metric_summary": run.metrics.order_by().values_list("key", flat=True).distinct(),
        "can_cancel": run.is_active and can_cancel(request.user, run),
    }
    if request.htmx:
        return render(request, "runs/partials/run_live.html", context)
    return render(request, "runs/run_detail.html", context)


@login_required
@require_POST
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=pk)
    if not can_cancel(request.user, run):
        messages.error(request, "Only the run's submitter or staff may cancel it.")
    else:
        try:
            do_cancel_run(run.pk, request.user)
        except Conflict as exc:
            messages.warning(request, exc.detail)
        else:
            messages.info(request, f"Cancel of run #{run.pk} requested.")
    if request.htmx:
        return HttpResponseClientRedirect(run.get_absolute_url())
    return redirect(run)
