from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from npulab.hosts.models import Host
from npulab.projects.selectors import visible_projects
from npulab.runs import capabilities, listing, logview
from npulab.runs.access import change_refused, may_change, run_for, visible_runs
from npulab.runs.bundle import bundle_response
from npulab.runs.forms import RunSubmitForm
from npulab.runs.kinds import get as get_kind
from npulab.runs.models import Run
from npulab.runs.pages import run_headlines, run_panels
from npulab.runs.selectors import (
    LOG_PAGE_LINES,
    MAX_LOG_QUERY,
    NEWEST,
    cancel_warning,
    environment_differences,
    log_attempts,
    log_hits,
    log_page,
    log_tail,
    log_text,
    logged_parameters,
    mark_evidence,
    metric_keys,
    progress,
    steps,
)
from npulab.runs.services import (
    Conflict,
    SubmissionInvalid,
    do_cancel_run,
    do_restart_run,
    do_submit_run,
)
from npulab.series.owners import Owner
from npulab.series.reads import keys
from workers.contract.diagnosis import CATEGORIES

RUNS_PER_PAGE = 50
MAX_COMPARED = 20
MAX_ID = 2**63  # a BigAutoField key; a larger number is no run's
RECENT_TO_PICK = 50
# Summary entries the page shows in their own place: the steps table, the log card.
SUMMARY_SHOWN_ELSEWHERE = ("steps", "stderr_tail")


@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    runs = visible_runs(request.user, Run.objects.select_related("host", "submitted_by", "project"))
    filters = listing.filters_from(request.GET)
    runs = listing.apply(runs, filters)
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "filters": filters,
        "statuses": Run.Status.choices,
        "kinds": visible_runs(request.user).order_by().values_list("kind", flat=True).distinct(),
        "hosts": Host.objects.values_list("name", flat=True),
        "projects": visible_projects(request.user).values_list("slug", flat=True),
        "categories": list(CATEGORIES),
    }
    template = "runs/partials/run_table.html" if request.htmx else "runs/run_list.html"
    return render(request, template, context)


@login_required
@require_http_methods(["GET", "POST"])
def run_submit(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = RunSubmitForm(request.POST, user=request.user)
        if form.is_valid():
            try:
                run = do_submit_run(request.user, form.document())
            except SubmissionInvalid as error:
                form.add_submission_errors(error)
            except PermissionDenied as refused:
                form.add_error("project", str(refused))
            else:
                messages.success(request, f"Run #{run.pk} queued.")
                if request.htmx:
                    return HttpResponseClientRedirect(run.get_absolute_url())
                return redirect(run)
    else:
        form = RunSubmitForm(
            kind=request.GET.get("kind"), user=request.user, initial=_initial(request)
        )
    return render(request, "runs/run_submit.html", {"form": form})


def _initial(request: HttpRequest) -> dict[str, str]:
    keys = ("project", "host", "device_type")
    return {key: request.GET[key] for key in keys if key in request.GET}


@login_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = run_for(
        request.user, pk, Run.objects.select_related("host", "submitted_by", "snapshot", "project")
    )
    may = may_change(request.user, run)
    kind = get_kind(run.kind)
    panels = run_panels(kind.panels, capabilities.of(run))
    headlines = run_headlines(kind.headline)
    shows_attempts = len(run.attempts.all()) > 1 or kind.shows_attempts
    context = {
        "run": run,
        "kind": kind,
        "headline": kind.headline,
        # Those every run may have (a profile's findings), after the kind's own.
        "more_headlines": [panel.template for panel in headlines if panel is not kind.headline],
        "panels": [panel.template for panel in panels],
        # The cards under the facts go two a row; an odd last one takes the whole row.
        "cards": len(panels) + shows_attempts,
        "cards_odd": (len(panels) + shows_attempts) % 2 == 1,
        "shows_attempts": shows_attempts,
        "steps": steps(run),
        "log": log_tail(run),
        "metric_summary": metric_keys(run),
        "logged": logged_parameters(run),
        "progress": progress(run),
        "summary": {
            key: value
            for key, value in (run.result.get("summary") or {}).items()
            if key not in SUMMARY_SHOWN_ELSEWHERE
        },
        "attempts": list(run.attempts.select_related("host")),
        "placements": list(run.placements.filter(attempt=run.attempt).select_related("host"))
        if run.hosts > 1
        else [],
        "resumes_from": next(filter(None, (c.resumes_from(run) for c in capabilities.of(run))), ""),
        "can_cancel": run.is_active and may,
        "can_restart": run.status in Run.RESTARTABLE and may,
        "can_manage": may,
        # The flashes above the page told of the status it was loaded with (``Run #7
        # queued.``): a refresh that shows another status drops them.
        "status_changed": request.GET.get("shown", run.status) != run.status,
    }
    # The steps, or the summary of a kind without a headline, take a card beside the facts.
    context["beside_facts"] = bool(
        context["steps"] or kind.reports_steps or (context["summary"] and not kind.headline)
    )
    if context["can_cancel"] and not run.cancel_requested:
        context["cancel_warning"] = cancel_warning(run)
    for panel in [*panels, *headlines]:
        context.update(panel.render_context(run))
    if request.htmx:
        return render(request, "runs/partials/run_live.html", context)
    return render(request, "runs/run_detail.html", context)


def _log_request(request: HttpRequest, run: Run) -> tuple[int | None, str, list[str]]:
    """The attempt and search asked for, and what is wrong with them."""
    errors = []
    attempts = log_attempts(run)
    attempt: int | None = None
    asked = request.GET.get("attempt", "")
    if asked:
        if asked.isascii() and asked.isdigit() and int(asked) in attempts:
            attempt = int(asked)
        else:
            known = ", ".join(str(number) for number in attempts) or "none yet"
            errors.append(f"attempt: no attempt {asked[:20]!r} of this run (it has {known})")
    query = request.GET.get("q", "")
    if len(query) > MAX_LOG_QUERY:
        errors.append(f"q: a search of at most {MAX_LOG_QUERY} characters")
        query = ""
    return attempt, query, errors


def _log_view_filters(
    request: HttpRequest, run: Run, errors: list[str]
) -> tuple[str, int | None, int | None]:
    """The stream, the node (a host of a run across hosts) and the rank (a process of a
    multi-process run) the log page is narrowed to."""
    stream = request.GET.get("stream", "")
    if stream and stream not in logview.STREAMS:
        errors.append(f"stream: one of {', '.join(logview.STREAMS)}")
        stream = ""
    node = _log_number(request, "node", run.hosts, "a node rank", errors)
    rank = _log_number(request, "rank", run.world_size, "a rank", errors)
    return stream, node, rank


def _log_number(
    request: HttpRequest, name: str, count: int, what: str, errors: list[str]
) -> int | None:
    """The number ``name`` asks for, below ``count``; None when it asks for none."""
    asked = request.GET.get(name, "")
    if not asked:
        return None
    if asked.isascii() and asked.isdigit() and int(asked) < count:
        return int(asked)
    errors.append(f"{name}: {what} from 0 to {count - 1}")
    return None


def _log_line_param(request: HttpRequest, name: str, errors: list[str]) -> int | None:
    """A line number the search goes on from (``after``) or back from (``before``)."""
    asked = request.GET.get(name, "")
    if not asked:
        return None
    if asked.isascii() and asked.isdigit() and len(asked) <= 18:
        return int(asked)
    errors.append(f"{name}: a line number")
    return None


@login_required
def run_log(request: HttpRequest, pk: int) -> HttpResponse:
    """The whole log of one attempt, a page at a time, or the lines of it that match a search."""
    run = run_for(request.user, pk)
    attempt, query, errors = _log_request(request, run)
    attempts = log_attempts(run)
    if attempt is None and attempts:
        attempt = attempts[-1]
    stream, node, rank = _log_view_filters(request, run, errors)
    after, before = (
        _log_line_param(request, "after", errors),
        _log_line_param(request, "before", errors),
    )
    live = run.is_active and attempt == run.attempt
    page = request.GET.get("page") or ("last" if live else None)
    narrowed = bool(query or stream or node is not None or rank is not None)
    if narrowed and page == "last" and after is None and before is None:
        before = NEWEST  # a live run's hits, like its log, open on the newest
    # A live log followed on its newest page, unfiltered, refreshes itself.
    following = live and page == "last" and not narrowed
    context = {
        "run": run,
        "attempts": attempts,
        "attempt": attempt,
        "query": query,
        "stream": stream,
        "node": node,
        "rank": rank,
        "streams": logview.STREAMS,
        "nodes": range(run.hosts) if run.hosts > 1 else [],
        "ranks": range(run.world_size) if run.world_size > 1 else [],
        "following": following,
        "errors": errors,
        "max_query": MAX_LOG_QUERY,
        # The whole log goes by pages of numbered lines; a search (or a stream, or a node)
        # by stretches of hits, each going on from the last.
        "page": log_page(run, attempt, page) if attempt and not narrowed else None,
        "hits": (
            log_hits(run, attempt, query, stream, node, after or 0, before, rank)
            if attempt and narrowed
            else None
        ),
        "first_error": logview.first_error(run, attempt, LOG_PAGE_LINES) if attempt else None,
        "evidence": [
            str(item.get("text", ""))[:MAX_LOG_QUERY]
            for item in (run.diagnosis or {}).get("evidence") or []
            if isinstance(item, dict) and item.get("text")
        ],
    }
    context["lines"] = context["page"] if context["page"] is not None else context["hits"]
    # The page's links keep what the log is narrowed to.
    kept = {"attempt": attempt, "q": query, "stream": stream, "node": node, "rank": rank}
    context["filters"] = urlencode({k: v for k, v in kept.items() if v not in (None, "")})
    if context["lines"] is not None:
        mark_evidence(run, list(context["lines"]))
    template = "runs/partials/log_lines.html" if request.htmx else "runs/run_log.html"
    return render(request, template, context, status=400 if errors else 200)


@login_required
def run_log_text(request: HttpRequest, pk: int) -> HttpResponse:
    """The log as a text file: every attempt's, or the one asked for (and its search hits)."""
    run = run_for(request.user, pk)
    attempt, query, errors = _log_request(request, run)
    if errors:
        return HttpResponse("\n".join(errors) + "\n", status=400, content_type="text/plain")
    name = f"run-{run.pk}" + (f"-attempt-{attempt}" if attempt else "") + ".log"
    response = StreamingHttpResponse(
        log_text(run, attempt, query), content_type="text/plain; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@login_required
def run_bundle(request: HttpRequest, pk: int) -> HttpResponse:
    """The run's support bundle (spec, snapshot, diagnosis, logs, plogs, health, telemetry)."""
    return bundle_response(run_for(request.user, pk))


@login_required
@require_POST
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    run = run_for(request.user, pk)
    refused = change_refused(request.user, run, "cancel it")
    if refused:
        messages.error(request, refused)
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


@login_required
@require_POST
def run_restart(request: HttpRequest, pk: int) -> HttpResponse:
    run = run_for(request.user, pk)
    refused = change_refused(request.user, run, "restart it")
    if refused:
        messages.error(request, refused)
    else:
        try:
            run = do_restart_run(run.pk, request.user)
        except Conflict as exc:
            messages.warning(request, exc.detail)
        else:
            messages.info(request, f"Run #{run.pk} restarts as attempt {run.attempt}.")
    return redirect(run)


def _requested_ids(values: list[str]) -> tuple[list[int], list[str]]:
    """Run ids from repeated ``ids`` parameters, each one id or a comma-separated list.

    Returns the ids in the order given without repeats, and the parts that are not ids.
    """
    ids: dict[int, None] = {}
    rejected = []
    for value in values:
        for part in value.split(","):
            part = part.strip()
            if not part:
                continue
            if part.isascii() and part.isdigit() and int(part) < MAX_ID:
                ids.setdefault(int(part), None)
            else:
                rejected.append(part)
    return list(ids), rejected


@login_required
def run_compare(request: HttpRequest) -> HttpResponse:
    """One metric of several runs on one chart, with how their environments differ."""
    ids, rejected = _requested_ids(request.GET.getlist("ids"))
    if rejected:
        shown = ", ".join(part[:20] for part in rejected[:5]) + (" …" if len(rejected) > 5 else "")
        messages.error(request, f"Ignored, not run ids: {shown}")
    if len(ids) > MAX_COMPARED:
        messages.warning(
            request,
            f"{len(ids)} runs selected: comparing the first {MAX_COMPARED}, "
            f"{len(ids) - MAX_COMPARED} left out.",
        )
    ids = ids[:MAX_COMPARED]
    found = visible_runs(request.user, Run.objects.filter(pk__in=ids))
    found = found.select_related("host", "snapshot").in_bulk()
    if missing := [pk for pk in ids if pk not in found]:
        messages.warning(request, "No such run: " + ", ".join(f"#{pk}" for pk in missing))
    runs = [found[pk] for pk in ids if pk in found]
    available = sorted({key for run in runs for key in keys(Owner.of_run(run.pk))})
    key = request.GET.get("key") or ("loss" if "loss" in available else (available or [""])[0])
    context = {
        "runs": runs,
        "ids": ",".join(str(run.pk) for run in runs),
        "key": key,
        "keys": available,
        "chart_runs": json.dumps(
            [
                {
                    "label": f"#{run.pk} {run.name or run.kind}",
                    "url": reverse("api:run-metrics", args=[run.pk]),
                }
                for run in runs
            ]
        ),
        "environments": environment_differences(runs),
        "kind_sections": _compare_sections(runs),
        "recent": _recent_to_pick(request.user, runs),
        "max_compared": MAX_COMPARED,
    }
    return render(request, "runs/run_compare.html", context)


def _compare_sections(runs: list[Run]) -> list[dict]:
    """The compare panels of the runs' kind, when they are all of one kind."""
    kinds = {run.kind for run in runs}
    if len(kinds) != 1:
        return []
    sections = []
    for panel in get_kind(kinds.pop()).compare_panels:
        extra = panel.context(runs) if panel.context else {}
        sections.append({"template": panel.template, **extra})
    return sections


def _recent_to_pick(user: Any, runs: list[Run]) -> list[Run]:
    """Recent runs to add: of the kinds already chosen, or of any kind."""
    recent = visible_runs(user, Run.objects.select_related("host"))
    if runs:
        recent = recent.filter(kind__in={run.kind for run in runs})
    return list(recent[:RECENT_TO_PICK])
