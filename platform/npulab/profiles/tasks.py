"""Control-plane tasks of the profiles app."""

from __future__ import annotations

from celery import shared_task

from npulab.profiles.services import do_summarise_profile, sweep_stale_profiles
from workers.contract.tasks import SUMMARISE_PROFILE, SWEEP_PROFILES


@shared_task(name=SUMMARISE_PROFILE, ignore_result=True)
def summarise_profile_task(profile_id: int, again: bool = False) -> None:
    do_summarise_profile(profile_id, again=again)


@shared_task(name=SWEEP_PROFILES, ignore_result=True)
def sweep_profiles_task() -> None:
    sweep_stale_profiles()
