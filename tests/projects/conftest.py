"""A site with two projects: "alpha" on its own pool, and the default project on the default pool.

alpha's cast: alice (owner), bob (member), vera (viewer); "other" is only in the
default project, as every new user is. alpha has one host, alpha-01; the default
pool has cpu-01.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from npulab.artifacts.models import Artifact
from npulab.checkpoints.models import Checkpoint
from npulab.checkpoints.services import record_checkpoint
from npulab.coverage.models import OpResult
from npulab.hosts.models import Host
from npulab.hosts.services import do_issue_host_token, do_move_host_to_pool
from npulab.profiles.models import Profile
from npulab.projects.models import Membership, Pool, Project
from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_claim_run, do_submit_run
from tests.conftest import make_operator, register
from tests.factories import HostFactory, RunFactory, UserFactory
from tests.runs.test_attempts import TRAINING
from workers.contract.kinds import validate

STEP = 7
PAYLOAD = b"weights " * 100


@dataclass
class Site:
    pool: Pool
    alpha: Project
    host: Host
    alice: Any
    bob: Any
    vera: Any
    other: Any
    run: Run
    coverage: Run
    coverage_baseline: Run
    parity: Run
    checkpoint: Checkpoint
    artifact: Artifact
    profile: Profile


def make_project(slug: str, pools: list[Pool], **roles: Any) -> Project:
    project = Project.objects.create(slug=slug, name=slug.title())
    project.pools.set(pools)
    for role, users in roles.items():
        for user in users if isinstance(users, list) else [users]:
            Membership.objects.create(project=project, user=user, role=role)
    return project


def store_checkpoint(host: Host, run: Run) -> Checkpoint:
    """A checkpoint the host wrote and uploaded, stored in the artifact store."""
    digest = hashlib.sha256(PAYLOAD).hexdigest()
    record_checkpoint(run, {"step": STEP, "path": "/w/s", "bytes": len(PAYLOAD), "sha256": digest})
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {do_issue_host_token(host)}")
    reply = client.put(
        f"/api/v1/agent/runs/{run.pk}/checkpoints/{STEP}/",
        PAYLOAD,
        content_type="application/octet-stream",
    )
    assert reply.status_code == 201, reply.content
    return Checkpoint.objects.select_related("artifact").get(run=run, step=STEP)


@pytest.fixture
def store(settings: Any, tmp_path: Any) -> None:
    settings.NPULAB = dict(settings.NPULAB, ARTIFACT_DIR=str(tmp_path / "artifacts"))
    settings.STORAGES = dict(
        settings.STORAGES,
        artifacts={"BACKEND": "npulab.artifacts.storage.LocalArtifactStorage"},
    )


@pytest.fixture
def site(db: None, store: None) -> Site:
    pool = Pool.objects.create(name="alpha-pool")
    alice, bob, vera, other = (
        UserFactory(username=name) for name in ("alice", "bob", "vera", "other")
    )
    alpha = make_project("alpha", [pool], owner=alice, member=bob, viewer=vera)
    host = register(HostFactory(name="alpha-01"))
    do_move_host_to_pool(host, pool, by=None)
    register(HostFactory(name="cpu-01"))
    run = do_submit_run(bob, {**TRAINING, "project": "alpha"})
    place_queued_runs()
    run.refresh_from_db()
    run = do_claim_run(host, run.pk, run.attempt)
    checkpoint = store_checkpoint(host, run)
    coverage_spec = validate({"kind": "coverage", "device_type": "cpu"})
    coverage, baseline = (
        RunFactory(spec=coverage_spec, project=alpha, submitted_by=bob, status=status)
        for status in (Run.Status.SUCCEEDED, Run.Status.SUCCEEDED)
    )
    for each in (coverage, baseline):
        OpResult.objects.create(run=each, op="add", dtype="float32", status="pass")
    parity = RunFactory(
        spec=validate({"kind": "parity", "device_type": "cpu", "entry": "builtin:mlp"}),
        project=alpha,
        submitted_by=bob,
        status=Run.Status.SUCCEEDED,
    )
    profile = Profile.objects.create(
        run=run,
        artifact=checkpoint.artifact,
        name="trace.json",
        source=Profile.Source.IMPORTED,
        format=Profile.Format.KINETO,
        bytes=len(PAYLOAD),
        raw_bytes=len(PAYLOAD),
    )
    return Site(
        pool,
        alpha,
        host,
        alice,
        bob,
        vera,
        other,
        run,
        coverage,
        baseline,
        parity,
        checkpoint,
        checkpoint.artifact,
        profile,
    )


@pytest.fixture
def operator(db: None) -> Any:
    return make_operator(UserFactory(username="oper"))


def browser_for(client: Any, user: Any) -> Any:
    client.force_login(user)
    return client
