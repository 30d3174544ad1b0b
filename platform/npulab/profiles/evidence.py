"""What a run's profile tells the upgrade review: its step time (npulab.runs.evidence)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from npulab.profiles.compare import step_time_us
from npulab.profiles.models import Profile
from npulab.runs.kinds import Headline

if TYPE_CHECKING:
    from npulab.runs.models import Run

SOURCE = "profiles"
# The review's key: the median step of the run's newest ready profile, in milliseconds.
STEP_TIME = "profile_step_ms"


def step_times(runs: list[Run]) -> dict[int, dict[str, Headline]]:
    """Each run's newest ready profile's step time (runs without one are left out)."""
    found: dict[int, dict[str, Headline]] = {}
    profiles = (
        Profile.objects.filter(run__in=[run.pk for run in runs], status=Profile.Status.READY)
        .order_by("run_id", "-ready_at", "-id")
        .only("run_id", "summary")
    )
    for profile in profiles:
        if profile.run_id in found:
            continue  # an older profile of a run already counted
        step = step_time_us(profile.summary or {})
        if step is not None:
            found[profile.run_id] = {STEP_TIME: Headline(step / 1000, lower_is_better=True)}
    return found
