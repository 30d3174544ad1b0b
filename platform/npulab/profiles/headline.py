"""A profiled run's page leads with what its profile found: the summary's top findings.

Shown on every run page (``npulab.runs.pages.add_headline``), after the kind's own
headline; a run with no summarised profile shows nothing of it.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from npulab.profiles.models import Profile
from npulab.runs.models import Run

TEMPLATE = "profiles/partials/headline.html"
# The page leads with a few; the Profiles card further down lists them all.
TOP = 3


def top_findings(findings: list[dict[str, Any]], count: int = TOP) -> list[dict[str, Any]]:
    """Warnings before notes, each group in the summary's own order (its worst first)."""
    ranked = sorted(enumerate(findings), key=lambda item: (item[1].get("severity") != "warning",))
    return [finding for _, finding in ranked[:count]]


def headline_context(run: Run) -> dict[str, Any]:
    """``profile_headline``: the newest summarised profile of ``run``, its top findings and
    how many there are in all; None when no profile of it is summarised."""
    profile = (
        Profile.objects.filter(run=run, status=Profile.Status.READY)
        .only("pk", "name", "summary", "created")
        .order_by("-created", "-pk")
        .first()
    )
    if profile is None or not (profile.summary or {}).get("trace"):
        return {"profile_headline": None}
    findings = profile.summary.get("findings") or []
    return {
        "profile_headline": {
            "profile": profile,
            "findings": top_findings(findings),
            "total": len(findings),
            "timeline_url": reverse("profiles:timeline", args=[profile.pk]),
        }
    }
