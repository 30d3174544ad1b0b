"""A parity run whose sides name hosts of their own: two placements apart, matched each to
its side, side A's dump handed to side B's host, both sides' stacks on record."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from npulab.core.errors import SubmissionInvalid
from npulab.hosts.models import Host
from npulab.hosts.services import do_issue_host_token
from npulab.parity.kind import PARITY
from npulab.projects.models import Pool, default_project
from npulab.runs.gangs import gang_of
from npulab.runs.models import DeviceLease, Placement, Run
from npulab.runs.placement import distinct
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import (
    do_claim_run,
    do_finish_run,
    do_ingest_events,
    do_submit_run,
)
from npulab.snapshots.services import do_record_snapshot
from tests.conftest import register, token_client
from tests.factories import HostFactory
from workers.contract.capabilities import HANDOFF_FILES

pytestmark = pytest.mark.django_db


def host(name: str, devices: int = 1, labels: tuple[str, ...] = (), **fields: Any) -> Host:
    # No advertise_address: placements apart never rendezvous, so they need none.
    found = register(HostFactory(name=name, labels=list(labels), **fields), "cpu", devices)
    return Host.objects.get(pk=found.pk)


def parity(owner: Any, a: dict | None = None, b: dict | None = None, **extra: Any) -> Run:
    return do_submit_run(
        owner,
        {
            "kind": "parity",
            "device_type": "cpu",
            "entry": "builtin:mlp",
            "a": a or {},
            "b": b or {},
            **extra,
        },
    )


def refused(owner: Any, **sides: Any) -> dict[str, str]:
    with pytest.raises(SubmissionInvalid) as caught:
        parity(owner, **sides)
    return caught.value.errors


def test_sides_naming_hosts_are_two_placements_apart_side_b_node_zero(owner) -> None:
    reference, candidate = host("ref-1"), host("npu-lab")
    run = parity(owner, a={"host": "ref-1"}, b={"host": "npu-lab", "dtype": "bfloat16"})
    assert run.hosts == 2
    assert [(rule["role"], rule["host"]) for rule in run.placement_rules] == [
        ("side b", "npu-lab"),
        ("side a", "ref-1"),
    ]
    assert run.shape == "1 cpu + 1 cpu"
    assert not run.rendezvous
    place_queued_runs()
    run.refresh_from_db()
    placements = list(run.placements.order_by("node_rank"))
    assert [(p.node_rank, p.role, p.host_name, p.master_port) for p in placements] == [
        (0, "side b", "npu-lab", None),
        (1, "side a", "ref-1", None),
    ]
    # Side B, which compares and reports, is the run's host.
    assert run.host == candidate
    assert DeviceLease.objects.filter(run=run).count() == 2
    claimed = do_claim_run(reference, run.pk, 1)
    gang = gang_of(claimed, claimed.placement)
    assert gang == {
        "hosts": 2,
        "node_rank": 1,
        "role": "side a",
        "first_rank": 1,
        "local_world_size": 1,
        "world_size": 2,
        "rendezvous": False,
    }


def test_a_parity_run_without_side_placements_stays_on_one_host(owner) -> None:
    host("cpu-1"), host("cpu-2")
    run = parity(owner, b={"dtype": "bfloat16"})
    assert (run.hosts, run.placement_rules, run.shape) == (1, [], "1 cpu")
    place_queued_runs()
    assert Placement.objects.get(run=run).role == ""


def test_each_side_goes_to_a_host_matching_its_own_labels_never_both_to_one(owner) -> None:
    # Side B could take either host and fits the small one best; side A only the small one
    # (its label): the matching moves side B to the other.
    host("small", devices=1, labels=("reference",))
    host("big", devices=4)
    run = parity(owner, a={"labels": ["reference"]}, b={"dtype": "float16"})
    place_queued_runs()
    placed = dict(run.placements.values_list("role", "host_name"))
    assert placed == {"side a": "small", "side b": "big"}


def test_a_side_whose_host_is_busy_waits_and_says_which_side(owner) -> None:
    host("ref-1"), host("npu-lab")
    busy = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu", "host": "ref-1"})
    place_queued_runs()
    assert Run.objects.get(pk=busy.pk).status == Run.Status.DISPATCHED
    run = parity(owner, a={"host": "ref-1"}, b={"host": "npu-lab"})
    place_queued_runs()
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert not DeviceLease.objects.filter(run=run).exists()
    assert run.queue_reason == "side a: host 'ref-1' has 0 of 1 devices free, the run needs 1"


def test_a_side_no_host_could_take_is_refused_naming_the_sides_field(owner) -> None:
    host("ref-1"), host("npu-lab", labels=("ascend",))
    errors = refused(owner, a={"host": "ref-1"}, b={"host": "nowhere"})
    assert set(errors) == {"b.host"}
    assert "side b: no host named 'nowhere'; the hosts are npu-lab, ref-1" in errors["b.host"]
    errors = refused(owner, a={"host": "ref-1"}, b={"labels": ["ascend", "cann9"]})
    assert set(errors) == {"b.labels"}
    assert "no cpu host carries label(s) ascend, cann9" in errors["b.labels"]
    errors = refused(owner, a={"pool": "gpu-reference"})
    assert set(errors) == {"a.pool"}
    assert "no pool 'gpu-reference' in project 'default'" in errors["a.pool"]
    errors = refused(owner, a={"device_type": "npu", "host": "ref-1"})
    assert errors == {"a.device_type": errors["a.device_type"]}
    assert "host 'ref-1' has 1 cpu device, side a needs npu" in errors["a.device_type"]


def test_sides_apart_on_a_stack_of_one_host_are_refused(owner) -> None:
    host("only-1")
    errors = refused(owner, a={"host": "only-1"}, b={"host": "only-1"})
    assert set(errors) == {"a.host"}
    assert "side b and side a each need a host of their own" in errors["a.host"]
    # Side B asks for nothing of its own, but still needs a host other than side A's.
    assert refused(owner, a={"host": "only-1"})["a.host"].startswith("side b and side a")


def test_a_side_may_ask_for_a_pool_of_the_project(owner) -> None:
    reference_pool = Pool.objects.create(name="gpu-reference")
    default_project().pools.add(reference_pool)
    host("ref-1", pool=reference_pool)
    host("cpu-2")
    empty = Pool.objects.create(name="empty")
    default_project().pools.add(empty)
    errors = refused(owner, a={"pool": "empty"})
    assert errors == {"a.pool": errors["a.pool"]}
    assert "side a: no host is in pool 'empty'" in errors["a.pool"]
    run = parity(owner, a={"pool": "gpu-reference"})
    place_queued_runs()
    assert dict(run.placements.values_list("role", "host_name")) == {
        "side a": "ref-1",
        "side b": "cpu-2",
    }


def test_the_api_answers_400_naming_the_sides_field(owner) -> None:
    host("ref-1")
    response = token_client(owner).post(
        "/api/v1/runs/",
        {"kind": "parity", "device_type": "cpu", "entry": "builtin:mlp", "b": {"host": "nope"}},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "no host named 'nope'" in response.json()["b.host"][0]
    # A bad key of a side is named the same way.
    response = token_client(owner).post(
        "/api/v1/runs/",
        {"kind": "parity", "device_type": "cpu", "entry": "builtin:mlp", "b": {"hots": "x"}},
        format="json",
    )
    assert response.status_code == 400
    assert "b.hots" in response.json()


def started(owner: Any) -> tuple[Run, Host, Host]:
    reference, candidate = host("ref-1"), host("npu-lab")
    run = parity(owner, a={"host": "ref-1"}, b={"host": "npu-lab"})
    place_queued_runs()
    do_claim_run(candidate, run.pk, 1)
    do_claim_run(reference, run.pk, 1)
    return Run.objects.get(pk=run.pk), reference, candidate


def agent(target: Host) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {do_issue_host_token(target)}")
    return client


def hand_over(run: Run, sender: Host, data: bytes) -> int:
    """Side A's host uploads its file through the agent API, as its worker does."""
    client = agent(sender)
    declared = client.post(
        f"/api/v1/agent/runs/{run.pk}/uploads/",
        {
            "name": "parity-side-a.tar",
            "kind": "handoff",
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        },
        format="json",
    )
    assert declared.status_code == 201, declared.content
    upload = declared.json()
    sent = client.put(
        f"/api/v1/agent/runs/{run.pk}/uploads/{upload['id']}/",
        data,
        content_type="application/octet-stream",
        HTTP_UPLOAD_OFFSET="0",
    )
    assert sent.status_code == 200, sent.content
    assert sent.json()["status"] == "stored"
    return upload["artifact"]["id"]


def test_side_as_file_reaches_side_bs_host_and_no_other(owner, settings, tmp_path) -> None:
    settings.NPULAB = {**settings.NPULAB, "ARTIFACT_DIR": str(tmp_path)}
    run, reference, candidate = started(owner)
    assert do_ingest_events(candidate, run.pk, 1, 0, 0, [])[HANDOFF_FILES] == []
    file_id = hand_over(run, reference, b"side a's dump")
    listed = do_ingest_events(candidate, run.pk, 1, 0, 0, [])[HANDOFF_FILES]
    assert [(item["id"], item["name"]) for item in listed] == [(file_id, "parity-side-a.tar")]
    fetched = agent(candidate).get(f"/api/v1/agent/runs/{run.pk}/handoff/{file_id}/")
    assert fetched.status_code == 200
    assert b"".join(fetched.streaming_content) == b"side a's dump"
    # A host with no share of the attempt gets nothing.
    stranger = agent(host("elsewhere")).get(f"/api/v1/agent/runs/{run.pk}/handoff/{file_id}/")
    assert stranger.status_code == 404


def test_side_bs_finding_names_its_host_and_side_as_failure_names_its(owner) -> None:
    run, reference, candidate = started(owner)
    handed = {"type": "result", "time": 1.0, "status": "succeeded", "reason": "handed over"}
    do_ingest_events(reference, run.pk, 1, 0, 10, [handed])
    do_finish_run(reference, run.pk, 1, {"exit_code": 0})
    diverged = {
        "type": "result",
        "time": 2.0,
        "status": "failed",
        "cause": "parity_diverged",
        "reason": "first divergent layer: Functional.linear.1.forward.input.1 (breaks cosine)",
    }
    do_ingest_events(candidate, run.pk, 1, 0, 10, [diverged])
    do_finish_run(candidate, run.pk, 1, {"exit_code": 1})
    run.refresh_from_db()
    assert (run.status, run.exit_cause) == (Run.Status.FAILED, "parity_diverged")
    assert run.exit_reason.startswith("host npu-lab (side b): first divergent layer")

    again, reference, candidate = started_again(owner)
    failed = {
        "type": "result",
        "time": 1.0,
        "status": "failed",
        "cause": "parity_side_failed",
        "reason": "side a failed: RuntimeError: no such op",
    }
    do_ingest_events(reference, again.pk, 1, 0, 10, [failed])
    do_finish_run(reference, again.pk, 1, {"exit_code": 1})
    # Side B, waiting for side A's file, is told to stop.
    assert do_ingest_events(candidate, again.pk, 1, 0, 0, [])["cancel"] is True
    do_finish_run(candidate, again.pk, 1, {"exit_code": -15})
    again.refresh_from_db()
    assert (again.status, again.exit_cause) == (Run.Status.FAILED, "parity_side_failed")
    assert again.exit_reason == ("host ref-1 (side a): side a failed: RuntimeError: no such op")


def started_again(owner: Any) -> tuple[Run, Host, Host]:
    reference, candidate = Host.objects.get(name="ref-1"), Host.objects.get(name="npu-lab")
    run = parity(owner, a={"host": "ref-1"}, b={"host": "npu-lab"})
    place_queued_runs()
    do_claim_run(candidate, run.pk, 1)
    do_claim_run(reference, run.pk, 1)
    return Run.objects.get(pk=run.pk), reference, candidate


def test_each_sides_host_snapshot_is_kept_and_shown_as_its_stack(owner, document, client) -> None:
    run, reference, candidate = started(owner)
    old = do_record_snapshot(reference, document(torch="2.1.0", cann="8.0.RC3")).snapshot
    new = do_record_snapshot(candidate, document(torch="2.5.1", cann="8.1.RC1")).snapshot
    for target, snapshot in ((reference, old), (candidate, new)):
        response = agent(target).post(
            "/api/v1/agent/snapshots/", {"snapshot": snapshot.data, "run": run.pk}, format="json"
        )
        assert response.status_code in (200, 201), response.content
    run.refresh_from_db()
    # The run's stack is side B's; side A's is its placement's.
    assert run.snapshot == new
    assert dict(run.placements.values_list("role", "snapshot")) == {
        "side a": old.pk,
        "side b": new.pk,
    }
    body = token_client(owner).get(f"/api/v1/runs/{run.pk}/parity/").json()
    sides = body["sides"]
    assert (sides["a"]["host"], sides["a"]["stack"]["cann"]) == ("ref-1", "8.0.RC3")
    assert (sides["b"]["host"], sides["b"]["stack"]["torch"]) == ("npu-lab", "2.5.1")
    detail = token_client(owner).get(f"/api/v1/runs/{run.pk}/").json()
    assert [(p["role"], p["host"], p["snapshot"]) for p in detail["placements"]] == [
        ("side b", "npu-lab", new.pk),
        ("side a", "ref-1", old.pk),
    ]
    # The page names each side's host and stack, and each placement's role and snapshot.
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    sides_line = page[page.index('id="parity-sides"') :].split("</div>")[0]
    assert 'data-side="a" data-host="ref-1"' in sides_line
    assert "CANN 8.0.RC3" in sides_line
    assert 'data-side="b" data-host="npu-lab"' in sides_line
    assert 'data-role="side a"' in page
    assert f"/snapshots/{old.pk}/" in page
    # The upgrade review groups it with runs against the same reference.
    group = PARITY.review_group(run)
    assert group.startswith("builtin:mlp · float32 vs float32 · side A on chip 910B3")
    assert "CANN 8.0.RC3" in group


def test_distinct_finds_one_each_when_a_greedy_choice_would_not() -> None:
    assert distinct([["x", "y"], ["x"]], key=str) == ["y", "x"]
    assert distinct([["x"], ["x"]], key=str) is None
    assert distinct([["x", "y"], ["y", "z"], ["x"]], key=str) == ["y", "z", "x"]
    assert distinct([], key=str) == []


def test_a_finished_attempts_handoff_upload_is_refused(owner, settings, tmp_path) -> None:
    settings.NPULAB = {**settings.NPULAB, "ARTIFACT_DIR": str(tmp_path)}
    run, reference, _candidate = started(owner)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, finished_at=timezone.now())
    response = agent(reference).post(
        f"/api/v1/agent/runs/{run.pk}/uploads/",
        {"name": "parity-side-a.tar", "kind": "handoff", "bytes": 1, "sha256": "0" * 64},
        format="json",
    )
    assert response.status_code == 422
    assert "no host waits for its files" in response.json()["detail"]


def test_a_side_on_a_host_of_another_device_type_gets_the_spec_of_its_own(owner) -> None:
    reference = host("ref-1")
    candidate = Host.objects.get(pk=register(HostFactory(name="npu-lab"), "npu", 1).pk)
    run = parity(owner, a={"host": "ref-1"}, b={"host": "npu-lab", "device_type": "npu"})
    assert run.shape == "1 npu + 1 cpu"
    place_queued_runs()
    claims = {
        target.name: agent(target).post(
            f"/api/v1/agent/runs/{run.pk}/claim/", {"attempt": 1}, format="json"
        )
        for target in (candidate, reference)
    }
    assert {name: reply.status_code for name, reply in claims.items()} == {
        "npu-lab": 200,
        "ref-1": 200,
    }
    assert claims["npu-lab"].json()["spec"]["device_type"] == "npu"
    assert claims["ref-1"].json()["spec"]["device_type"] == "cpu"
    assert claims["npu-lab"].json()["gang"]["rendezvous"] is False
