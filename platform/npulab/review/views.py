from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from npulab.hosts.models import Host
from npulab.review.review import review
from npulab.snapshots.forms import PlannedTargetForm
from npulab.snapshots.models import Snapshot
from npulab.snapshots.selectors import current_snapshot


@login_required
def upgrade_review(request: HttpRequest, name: str) -> HttpResponse:
    host = get_object_or_404(Host, name=name)
    current = current_snapshot(host)
    candidates = Snapshot.objects.select_related("host").exclude(pk=getattr(current, "pk", None))
    planned_form = PlannedTargetForm(request.GET if "plan" in request.GET else None)
    context: dict = {
        "host": host,
        "current": current,
        "candidates": candidates[:200],
        "planned_form": planned_form,
        "target_id": request.GET.get("target", ""),
    }
    if current is not None:
        if request.GET.get("target", "").isdigit():
            target = get_object_or_404(Snapshot, pk=int(request.GET["target"]))
            context["review"] = review(current, target=target, viewer=request.user)
        elif planned_form.is_bound and planned_form.is_valid():
            planned = {k: v for k, v in planned_form.cleaned_data.items() if v}
            context["review"] = review(current, planned=planned, viewer=request.user)
    return render(request, "review/upgrade_review.html", context)
