from __future__ import annotations

import pytest
from django.test import Client

from npulab.snapshots.models import Snapshot
from npulab.snapshots.services import do_record_snapshot
from tests.conftest import make_operator
from tests.factories import HostFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


@pytest.fixture
def upgraded(cpu_host, document) -> tuple[Snapshot, Snapshot]:
    old = do_record_snapshot(cpu_host, document(torch_npu="2.1.0.post8")).snapshot
    new = do_record_snapshot(cpu_host, document(torch_npu="2.5.1")).snapshot
    return old, new


def test_host_page_shows_the_environment_and_its_history(browser, upgraded) -> None:
    page = browser.get("/hosts/cpu-01/").content.decode()
    assert "torch_npu 2.1.0.post8 → 2.5.1, ~1 packages" in page
    assert "first snapshot" in page
    assert "npu-smi and the driver differ in version" in page  # a finding
    assert page.count("<td>910B3</td>") == 8  # the chips table
    old, new = upgraded
    assert f"?a={old.pk}&amp;b={new.pk}" in page


def test_a_host_without_snapshots_says_so(browser) -> None:
    HostFactory(name="fresh")
    assert "No snapshot yet" in browser.get("/hosts/fresh/").content.decode()


def test_snapshot_page_and_known_good(browser, owner, upgraded) -> None:
    make_operator(owner)
    _, new = upgraded
    page = browser.get(f"/snapshots/{new.pk}/").content.decode()
    assert new.short_hash in page
    assert "Mark known good" in page
    assert 'data-verdict="ok"' in page
    response = browser.post(f"/snapshots/{new.pk}/known-good/", {"note": "green all week"})
    assert response.status_code == 302
    new.refresh_from_db()
    assert (new.known_good, new.known_good_note) == (True, "green all week")
    page = browser.get(f"/snapshots/{new.pk}/").content.decode()
    assert "green all week" in page
    browser.post(f"/snapshots/{new.pk}/known-good/", {"action": "unmark"})
    new.refresh_from_db()
    assert not new.known_good


def test_diff_page(browser, upgraded) -> None:
    old, new = upgraded
    page = browser.get("/snapshots/diff/", {"a": old.pk, "b": new.pk}).content.decode()
    assert 'id="diff-packages"' in page
    assert "2.1.0.post8" in page
    assert "identical" not in page.split('id="diff"')[1].split("</p>")[0]
    same = browser.get("/snapshots/diff/", {"a": new.pk, "b": new.pk}).content.decode()
    assert 'id="identical"' in same
    bad = browser.get("/snapshots/diff/", {"a": old.pk, "b": 999999}).content.decode()
    assert "Select a valid choice" in bad
    assert 'id="diff"' not in bad


def test_upgrade_review_page(browser, cpu_host, document) -> None:
    do_record_snapshot(cpu_host, document(torch="2.1.0", torch_npu="2.1.0.post8"))
    staging = HostFactory(name="staging-01")
    target = do_record_snapshot(
        staging, document(torch="2.5.1", torch_npu="2.5.1", hostname="staging-01")
    ).snapshot
    page = browser.get(f"/hosts/cpu-01/upgrade-review/?target={target.pk}").content.decode()
    assert 'data-decision="caution"' in page
    assert "no run has succeeded under the target yet" in page
    plan = browser.get(
        "/hosts/cpu-01/upgrade-review/", {"plan": "1", "cann": "8.3.RC1", "torch_npu": "2.6.0"}
    ).content.decode()
    assert 'data-decision="caution"' in plan
    assert "2.6.0.post3" in plan
    empty = browser.get("/hosts/cpu-01/upgrade-review/", {"plan": "1"}).content.decode()
    assert "Name at least one version to plan for." in empty
    assert "data-decision" not in empty


def test_collect_snapshot_now(browser, owner, cpu_host) -> None:
    make_operator(owner)
    response = browser.post("/hosts/cpu-01/snapshot-request/")
    assert response.status_code == 302
    cpu_host.refresh_from_db()
    assert cpu_host.snapshot_requested
    assert "Snapshot requested" in browser.get("/hosts/cpu-01/").content.decode()


def test_the_history_page_lists_every_version_in_fixed_queries(
    browser, cpu_host, document, django_assert_max_num_queries
) -> None:
    for minor in range(30):
        do_record_snapshot(cpu_host, document(packages={"pyyaml": f"6.{minor}"}))
    with django_assert_max_num_queries(8):
        page = browser.get("/hosts/cpu-01/history/").content.decode()
    assert page.count('data-version="') == 30
    assert page.count("~1 packages") == 29
    host_page = browser.get("/hosts/cpu-01/").content.decode()
    assert host_page.count('data-version="') == 20
    assert "all 30 versions" in host_page
