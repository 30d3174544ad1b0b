"""Which profiles a user may see: those of the runs they may see (``npulab.runs.access``)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from npulab.profiles.models import Profile
from npulab.runs.access import visible_runs


def visible_profiles(user: Any, profiles: QuerySet[Profile] | None = None) -> QuerySet[Profile]:
    """``profiles`` (every profile by default) narrowed to those of the user's runs."""
    profiles = Profile.objects.all() if profiles is None else profiles
    return profiles.filter(run__in=visible_runs(user))
