"""A profile left ``summarising`` by a worker that died is ended by the sweeper."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from npulab.profiles.models import Profile
from npulab.profiles.services import STALE_SUMMARY_S, do_resummarise_profile, sweep_stale_profiles
from tests.profiles.test_import import post
from tests.runs.test_attempts import started

pytestmark = pytest.mark.django_db


def test_a_profile_stuck_summarising_is_failed_and_may_be_asked_for_again(
    profile_store: Any, owner: Any, cpu_host: Any, api: Any, cpu_trace: Any
) -> None:
    run = started(owner, cpu_host)
    assert post(api, run, "one.json", cpu_trace.read_bytes()).status_code == 201
    assert post(api, run, "two.json", cpu_trace.read_bytes()).status_code == 201
    stuck, busy = Profile.objects.order_by("pk")
    now = timezone.now()
    Profile.objects.filter(pk__in=[stuck.pk, busy.pk]).update(status=Profile.Status.SUMMARISING)
    Profile.objects.filter(pk=stuck.pk).update(updated=now - timedelta(seconds=STALE_SUMMARY_S + 1))

    assert sweep_stale_profiles(now) == 1

    stuck.refresh_from_db()
    busy.refresh_from_db()
    assert stuck.status == Profile.Status.FAILED
    assert "its worker stopped" in stuck.error
    # One still within the time a summary may take is left to its worker.
    assert busy.status == Profile.Status.SUMMARISING
    assert sweep_stale_profiles(now) == 0
    assert do_resummarise_profile(stuck).status == Profile.Status.PENDING
