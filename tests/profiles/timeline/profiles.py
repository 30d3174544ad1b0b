"""Profiles as the platform holds them once summarised: the trace stored as an artifact,
its index stored under the profile's key, for the view and browser tests."""

from __future__ import annotations

import gzip
import hashlib
import tempfile
from pathlib import Path
from typing import Any

from django.core.files.base import ContentFile
from django.utils import timezone

from npulab.artifacts.models import Artifact
from npulab.artifacts.storage import artifact_storage
from npulab.profiles.models import Profile
from npulab.profiles.timeline import INDEX_NAME, build_index
from npulab.runs.models import Run


def stored_profile(
    run: Run,
    trace: Path,
    summary: dict[str, Any] | None = None,
    events: Any = None,
    status: str = Profile.Status.READY,
) -> Profile:
    """A ready profile of ``run`` from the trace file ``trace`` (indexed here)."""
    data = gzip.compress(trace.read_bytes())
    name = trace.name + ".gz"
    storage = artifact_storage()
    artifact = Artifact.objects.create(
        run=run,
        attempt=1,
        kind=Artifact.Kind.TRACE,
        name=name,
        bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        status=Artifact.Status.STORED,
    )
    artifact.storage_key = storage.save(f"runs/{run.pk}/traces/{name}", ContentFile(data))
    artifact.save(update_fields=["storage_key"])
    profile = Profile.objects.create(
        run=run,
        artifact=artifact,
        name=name,
        source=Profile.Source.CAPTURED,
        format=Profile.Format.KINETO,
        status=status,
        summary=summary or {},
        bytes=len(data),
        raw_bytes=trace.stat().st_size,
        ready_at=timezone.now() if status == Profile.Status.READY else None,
    )
    if status == Profile.Status.READY:
        with tempfile.TemporaryDirectory() as folder:
            facts = build_index(str(trace), folder, events=events)
            key = f"profiles/{profile.pk}/test"
            with open(facts["path"], "rb") as built:
                storage.save(f"{key}/{INDEX_NAME}", ContentFile(built.read()))
        profile.index_key, profile.index = key, {**facts, "path": ""}
        profile.save(update_fields=["index_key", "index"])
    return profile


def record_torch_trace(path: Path) -> Path:
    """What torch.profiler exports for three steps of a small model's training on the CPU."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=3),
        on_trace_ready=lambda done: done.export_chrome_trace(str(path)),
        record_shapes=True,
    ) as profiler:
        for _ in range(4):
            optimiser.zero_grad()
            model(torch.randn(32, 64)).sum().backward()
            optimiser.step()
            profiler.step()
    return path


def use_local_stores(settings: Any, folder: Path) -> None:
    """The artifact store and the timeline cache in ``folder``, for one test."""
    settings.NPULAB = dict(
        settings.NPULAB,
        ARTIFACT_DIR=str(folder / "artifacts"),
        PROFILE_CACHE_DIR=str(folder / "cache"),
    )
    settings.STORAGES = dict(
        settings.STORAGES,
        artifacts={"BACKEND": "npulab.artifacts.storage.LocalArtifactStorage"},
    )
