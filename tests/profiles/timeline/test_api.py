"""GET /api/v1/profiles/<id>/timeline/: the window the page draws, for a token's script."""

from __future__ import annotations

from typing import Any

import pytest

from harness.timelines import write_trace
from npulab.profiles.models import Profile
from tests.factories import RunFactory
from tests.profiles.timeline.profiles import stored_profile, use_local_stores

pytestmark = pytest.mark.django_db


@pytest.fixture
def profile(settings: Any, tmp_path) -> Profile:
    use_local_stores(settings, tmp_path)
    write_trace(tmp_path / "trace.json", 100_000, seed=5)
    return stored_profile(RunFactory(), tmp_path / "trace.json")


def url(profile: Profile) -> str:
    return f"/api/v1/profiles/{profile.pk}/timeline/"


def test_a_window_of_some_lanes(api, profile) -> None:
    meta = profile.index
    answer = api.get(
        url(profile), {"start": meta["t_min"], "end": meta["t_max"], "width": 200, "lanes": "1"}
    )
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["lanes"] == [1]
    assert body["events"]
    assert {row[1] for row in body["events"]} == {1}
    assert body["width"] == 200


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"end": 1, "width": 10}, "start"),
        ({"start": 2, "end": 1, "width": 10}, "end"),
        ({"start": 0, "end": 1, "width": 0}, "width"),
        ({"start": 0, "end": 1, "width": 10, "lanes": "one"}, "lanes"),
    ],
)
def test_a_bad_parameter_is_a_400_that_names_it(api, profile, params, field) -> None:
    answer = api.get(url(profile), params)
    assert answer.status_code == 400
    body = answer.json()
    assert body["code"] == "invalid"
    assert field in body


def test_no_index_yet_is_a_409_and_no_profile_a_404(api, profile) -> None:
    Profile.objects.filter(pk=profile.pk).update(index_key="", status=Profile.Status.SUMMARISING)
    answer = api.get(url(profile), {"start": 0, "end": 1, "width": 10})
    assert answer.status_code == 409
    assert answer.json()["code"] == "conflict"
    assert (
        api.get("/api/v1/profiles/99999/timeline/", {"start": 0, "end": 1, "width": 10}).status_code
        == 404
    )


def test_it_wants_a_token(anon_api, profile) -> None:
    assert anon_api.get(url(profile), {"start": 0, "end": 1, "width": 10}).status_code == 401
