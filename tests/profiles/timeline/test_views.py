"""The timeline page, the JSON it reads (window, event, search) with its 400s, the trace's
download and the compare page, through Django's test client on the real database."""

from __future__ import annotations

import gzip
import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.test import Client
from django.urls import reverse

from harness.timelines import write_trace
from npulab.artifacts.storage import artifact_storage
from npulab.profiles.models import Profile
from npulab.profiles.timeline import INDEX_NAME
from tests.factories import RunFactory
from tests.profiles.timeline.profiles import stored_profile, use_local_stores

pytestmark = pytest.mark.django_db


@pytest.fixture
def stores(settings: Any, tmp_path) -> None:
    use_local_stores(settings, tmp_path)


@pytest.fixture
def browser_client(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


@pytest.fixture
def profile(stores, generated_small) -> Profile:
    trace, _ = generated_small
    return stored_profile(RunFactory(), trace)


@pytest.fixture
def generated_small(tmp_path_factory) -> tuple[Path, list]:
    path = tmp_path_factory.mktemp("small") / "small.json"
    write_trace(path, 300_000, seed=3)
    return path, json.loads(path.read_text())["traceEvents"]


def window_url(profile: Profile, **params: Any) -> str:
    query = "&".join(f"{key}={value}" for key, value in params.items())
    return reverse("profiles:timeline_window", args=[profile.pk]) + "?" + query


def test_the_page_carries_the_lanes_and_where_to_fetch_windows(browser_client, profile) -> None:
    page = browser_client.get(reverse("profiles:timeline", args=[profile.pk]) + "?at=5&span=2")
    assert page.status_code == 200
    config = page.context["config"]
    assert config["window"] == reverse("profiles:timeline_window", args=[profile.pk])
    assert (config["at"], config["span"]) == (5.0, 2.0)
    assert [lane["name"] for lane in config["lanes"]][:2] == [
        "thread 4242 (python)",
        "thread 4250 (autograd)",
    ]
    assert b'id="timeline-config"' in page.content
    assert b"profiles/timeline.js" in page.content


def test_a_window_answers_json_from_the_cached_index(browser_client, profile, settings) -> None:
    meta = profile.index
    answer = browser_client.get(
        window_url(profile, start=meta["t_min"], end=meta["t_max"], width=300)
    )
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["events"]
    assert body["buckets"]
    # The first view copied the index out of the storage; the copy serves the next.
    cached = list(Path(settings.NPULAB["PROFILE_CACHE_DIR"]).iterdir())
    assert len(cached) == 1
    assert cached[0].suffix == ".sqlite"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"end": 10, "width": 100}, "start"),
        ({"start": "soon", "end": 10, "width": 100}, "start"),
        ({"start": 0, "width": 100}, "end"),
        ({"start": 10, "end": 10, "width": 100}, "end"),
        ({"start": 0, "end": "inf", "width": 100}, "end"),
        ({"start": 0, "end": 10}, "width"),
        ({"start": 0, "end": 10, "width": -1}, "width"),
        ({"start": 0, "end": 10, "width": 100000}, "width"),
        ({"start": 0, "end": 10, "width": 100, "lanes": "1,x"}, "lanes"),
    ],
)
def test_a_bad_window_is_a_400_naming_the_parameter(browser_client, profile, params, field):
    answer = browser_client.get(window_url(profile, **params))
    assert answer.status_code == 400
    body = answer.json()
    assert body["code"] == "invalid"
    assert field in body
    assert body["detail"].startswith(field)


def test_a_profile_without_an_index_says_so(browser_client, stores, tmp_path) -> None:
    write_trace(tmp_path / "pending.json", 10_000)
    pending = stored_profile(RunFactory(), tmp_path / "pending.json", status="pending")
    answer = browser_client.get(window_url(pending, start=0, end=10, width=10))
    assert answer.status_code == 409
    assert "no timeline index" in answer.json()["detail"]
    page = browser_client.get(reverse("profiles:timeline", args=[pending.pk]))
    assert page.status_code == 200
    assert b"The timeline is not ready: the profile is pending." in page.content
    assert (
        browser_client.get(
            window_url(pending, start=0, end=10, width=10).replace(f"/{pending.pk}/", "/999999/")
        ).status_code
        == 404
    )


def test_an_event_and_a_search(browser_client, profile) -> None:
    found = browser_client.get(
        reverse("profiles:timeline_search", args=[profile.pk]) + "?q=memcpy"
    ).json()
    assert found["names"][0]["name"] == "Memcpy HtoD (Pageable -> Device)"
    first = found["matches"][0]
    detail = browser_client.get(
        reverse("profiles:timeline_event", args=[profile.pk, first["id"]])
    ).json()
    assert detail["name"] == first["name"]
    assert detail["category"] == "gpu_memcpy"
    assert detail["args"]["stream"] == 20
    missing = browser_client.get(reverse("profiles:timeline_event", args=[profile.pk, 10**8]))
    assert missing.status_code == 404
    empty = browser_client.get(reverse("profiles:timeline_search", args=[profile.pk]) + "?q=")
    assert empty.status_code == 400
    assert "q" in empty.json()


def test_the_page_links_the_raw_trace_as_stored(browser_client, profile, generated_small) -> None:
    trace, _ = generated_small
    page = browser_client.get(reverse("profiles:timeline", args=[profile.pk])).content.decode()
    link = reverse("api:profile-download", args=[profile.pk])
    assert f'id="trace-download" href="{link}"' in page
    answer = browser_client.get(link)
    assert answer.status_code == 200
    assert gzip.decompress(b"".join(answer.streaming_content)) == trace.read_bytes()


def test_the_pages_want_a_signed_in_user(client, profile) -> None:
    for url in (
        reverse("profiles:timeline", args=[profile.pk]),
        window_url(profile, start=0, end=1, width=1),
        reverse("profiles:timeline_search", args=[profile.pk]) + "?q=a",
        reverse("profiles:compare"),
    ):
        assert client.get(url).status_code == 302


def test_a_rebuilt_index_replaces_the_cached_copy(browser_client, profile, settings) -> None:
    meta = profile.index
    params = {"start": meta["t_min"], "end": meta["t_max"], "width": 50}
    assert browser_client.get(window_url(profile, **params)).status_code == 200
    cache = Path(settings.NPULAB["PROFILE_CACHE_DIR"])
    (first,) = cache.iterdir()
    # Summarised again: the same index under a new key.
    storage = artifact_storage()
    with storage.open(f"{profile.index_key}/{INDEX_NAME}", "rb") as old:
        storage.save(f"profiles/{profile.pk}/again/{INDEX_NAME}", ContentFile(old.read()))
    Profile.objects.filter(pk=profile.pk).update(index_key=f"profiles/{profile.pk}/again")
    assert browser_client.get(window_url(profile, **params)).status_code == 200
    (second,) = cache.iterdir()
    assert second != first


def test_an_index_of_another_format_is_a_409(browser_client, profile) -> None:
    storage = artifact_storage()
    name = f"profiles/{profile.pk}/other/{INDEX_NAME}"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "other.sqlite"
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("INSERT INTO meta VALUES ('version', '999')")
        db.commit()
        db.close()
        storage.save(name, ContentFile(path.read_bytes()))
    Profile.objects.filter(pk=profile.pk).update(index_key=f"profiles/{profile.pk}/other")
    answer = browser_client.get(window_url(profile, start=0, end=1, width=10))
    assert answer.status_code == 409
    assert "another format version" in answer.json()["detail"]
    page = browser_client.get(reverse("profiles:timeline", args=[profile.pk]))
    assert b"The timeline index cannot be read" in page.content
