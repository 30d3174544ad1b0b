"""The run page's "Profiles" card: the run's profiles, their summaries, and the import form.

Added to every run page from ProfilesConfig.ready (``npulab.runs.pages``). The card polls
its own URL while a profile is being summarised after the run has ended (the run page
itself stops polling then), and stops once every profile is ready or failed.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template import TemplateDoesNotExist
from django.template.loader import get_template
from django.urls import NoReverseMatch, reverse
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST

from npulab.profiles.models import Profile
from npulab.profiles.services import do_import_profile
from npulab.profiles.traces import ACCEPTED, TraceRefused, check_upload, limit_upload, max_bytes
from npulab.runs.access import change_refused, may_change, run_for
from npulab.runs.models import Run

TEMPLATE = "profiles/partials/panel.html"
SUMMARY_TEMPLATE = "profiles/partials/summary.html"


class ProfileImportForm(forms.Form):
    file = forms.FileField(
        label="Trace",
        help_text=f"A Kineto/Chrome trace or a torch_npu *_ascend_pt folder as a tar ({ACCEPTED}).",
    )


def _url(name: str, *args: Any) -> str:
    try:
        return reverse(name, args=args)
    except NoReverseMatch:  # a page another part of the app adds, not there (yet)
        return ""


def _summary_template() -> str:
    """The summary's partial (the summary part of the app), or "" while there is none."""
    try:
        get_template(SUMMARY_TEMPLATE)
    except TemplateDoesNotExist:
        return ""
    return SUMMARY_TEMPLATE


def panel_context(run: Run) -> dict[str, Any]:
    """What the card shows: ``profiles`` (each with its links), whether to poll, the form,
    and for a run whose ranks each recorded a window, those ranks side by side."""
    profiles = list(Profile.objects.filter(run=run).select_related("artifact"))
    for profile in profiles:
        profile.timeline_url = (
            _url("profiles:timeline", profile.pk) if profile.status == Profile.Status.READY else ""
        )
        profile.download_url = _url("api:profile-download", profile.pk)
    return {
        "profiles": profiles,
        "profiles_ranked": run.world_size > 1 or any(p.rank for p in profiles),
        "profile_ranks": by_rank(profiles),
        "profiles_polling": not run.is_active and any(not p.finished for p in profiles),
        "profiles_panel_url": reverse("profiles:run_panel", args=[run.pk]),
        "profile_import_url": reverse("profiles:run_import", args=[run.pk]),
        "profile_import_form": ProfileImportForm(),
        "profile_max_bytes": max_bytes(),
        "profile_compare_url": _url("profiles:compare"),
        "profile_summary_template": _summary_template(),
    }


def by_rank(profiles: list[Profile]) -> list[dict[str, Any]]:
    """The per-rank view: each rank's newest summarised profile, its median step and how
    its device time splits, the slowest rank's step marked (the one the others wait for in
    every collective). Empty unless two ranks or more have one."""
    newest: dict[int, Profile] = {}
    for profile in profiles:  # newest first
        if profile.status == Profile.Status.READY and profile.rank not in newest:
            newest[profile.rank] = profile
    if len(newest) < 2:
        return []
    rows = []
    for rank, profile in sorted(newest.items()):
        summary = profile.summary or {}
        device = (summary.get("ranks") or [{}])[0]
        rows.append(
            {
                "rank": rank,
                "profile": profile,
                "step_us": (summary.get("steps") or {}).get("median_us"),
                "idle_pct": device.get("idle_pct"),
                "compute_pct": device.get("compute_pct"),
                "non_compute_pct": device.get("non_compute_pct"),
                "slowest": False,
            }
        )
    timed = [row for row in rows if row["step_us"] is not None]
    if len(timed) > 1:
        max(timed, key=lambda row: row["step_us"])["slowest"] = True
    return rows


@login_required
def run_profiles_panel(request: HttpRequest, run_id: int) -> HttpResponse:
    """The card alone, for its own polling."""
    run = run_for(request.user, run_id)
    context = {"run": run, **panel_context(run)}
    context["can_manage"] = may_change(request.user, run)
    return render(request, TEMPLATE, context)


@csrf_exempt  # checked below, once the upload's limit is in place (Django's upload docs)
@login_required
@require_POST
def run_profile_import(request: HttpRequest, run_id: int) -> HttpResponse:
    """The card's import form: the trace is stored and summarised, or the page says why not."""
    run = run_for(request.user, run_id)
    try:
        handler = limit_upload(request)
    except TraceRefused as refused:
        messages.error(request, f"The trace was not imported: {refused}. Nothing was kept.")
        return redirect(run.get_absolute_url())
    return _import(request, run, handler)


@csrf_protect
def _import(request: HttpRequest, run: Run, handler: Any) -> HttpResponse:
    files = request.FILES  # the body is read here, under the limit
    try:
        check_upload(handler)
    except TraceRefused as refused:
        messages.error(request, f"The trace was not imported: {refused}. Nothing was kept.")
        return redirect(run.get_absolute_url())
    refused = change_refused(request.user, run, "add a profile to it")
    if refused:
        messages.error(request, refused)
        return redirect(run.get_absolute_url())
    form = ProfileImportForm(request.POST, files)
    if not form.is_valid():
        messages.error(request, "Import: " + " ".join(form.errors.get("file", ["no file"])))
        return redirect(run.get_absolute_url())
    upload = form.cleaned_data["file"]
    try:
        profile = do_import_profile(run, upload, upload.name, upload.size, request.user)
    except TraceRefused as refused:
        messages.error(request, f"{upload.name} was not imported: {refused}. Nothing was kept.")
        return redirect(run.get_absolute_url())
    messages.success(request, f"Imported {profile.name}; its summary follows in a moment.")
    return redirect(run.get_absolute_url() + "#profiles")
