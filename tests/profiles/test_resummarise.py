"""``manage.py resummarise_profiles``: after an upgrade, the profiles an older npulab
summarised are summarised again, and only those."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from npulab.profiles.models import Profile
from npulab.profiles.services import do_summarise_profile
from npulab.profiles.summary import SUMMARY_VERSION
from tests.profiles.test_import import post
from tests.runs.test_attempts import started

pytestmark = pytest.mark.django_db


def _ready(api: Any, run: Any, name: str, trace: bytes) -> Profile:
    assert post(api, run, name, trace).status_code == 201
    profile = do_summarise_profile(Profile.objects.latest("pk").pk)
    assert profile is not None
    assert profile.status == Profile.Status.READY
    return profile


def test_only_the_profiles_an_older_npulab_summarised_are_asked_for_again(
    profile_store: Any,
    owner: Any,
    cpu_host: Any,
    api: Any,
    cpu_trace: Any,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = started(owner, cpu_host)
    old = _ready(api, run, "old.json", cpu_trace.read_bytes())
    current = _ready(api, run, "current.json", cpu_trace.read_bytes())
    assert current.summary["version"] == SUMMARY_VERSION
    Profile.objects.filter(pk=old.pk).update(summary={**old.summary, "version": 1})
    requested: list[int] = []
    monkeypatch.setattr("npulab.profiles.services.request_summary", requested.append)

    out = StringIO()
    call_command("resummarise_profiles", "--dry-run", stdout=out)
    assert f"profile {old.pk} " in out.getvalue()
    assert f"profile {current.pk} " not in out.getvalue()
    assert "1 profile(s) summarised by an older npulab would be asked for again" in out.getvalue()
    assert Profile.objects.get(pk=old.pk).status == Profile.Status.READY

    with django_capture_on_commit_callbacks(execute=True):
        call_command("resummarise_profiles", stdout=StringIO())
    assert requested == [old.pk]
    assert Profile.objects.get(pk=old.pk).status == Profile.Status.PENDING
    assert Profile.objects.get(pk=current.pk).status == Profile.Status.READY
    # The control worker's summary is this version's: nothing is left to do.
    do_summarise_profile(old.pk)
    out = StringIO()
    call_command("resummarise_profiles", stdout=out)
    assert "0 profile(s)" in out.getvalue()
