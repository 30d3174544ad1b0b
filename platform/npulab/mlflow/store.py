"""The database behind ``/mlflow/``: experiments are projects, an MLflow run is an npulab run.

An outside client's run has no host: it is a training run (entry ``mlflow:client``)
created running when the client starts it and ended when the client ends it, so it is
listed, compared and used as review evidence like any other. What the client logs goes
through the runs' own ingestion (``npulab.runs.events.store_events``) as events with
source ``mlflow``: metrics, params and tags land exactly as a host's would. Its run id is
the npulab run's id; an experiment's id is its project's (``0``: the default project).

Its artifacts (``mlflow-artifacts:/<project>/<run>/artifacts``) are the run's artifacts of
kind ``mlflow``, named by their path: uploaded through the artifact store, with its size
limits, quotas and free-space check, and listed and downloaded like any other.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

from django.db import transaction
from django.utils import timezone

from npulab.artifacts.models import Artifact
from npulab.artifacts.services import (
    SPOOL_MEMORY_BYTES,
    ArtifactTooLarge,
    NameUnusable,
    NoRoom,
    StoreFull,
    check_room,
    check_size,
    do_append_chunk,
    do_create_upload,
    do_damage_upload,
    open_artifact,
)
from npulab.projects.models import Membership, Project, default_project, role_at_least
from npulab.projects.selectors import role_in, visible_projects
from npulab.runs.access import visible_runs
from npulab.runs.events import store_events
from npulab.runs.models import Run
from npulab.runs.selectors import logged_parameters
from npulab.series.owners import Owner
from npulab.series.reads import find, whole
from workers.contract import kinds
from workers.contract.capture import MLFLOW, PARAM, SOURCE_FIELD, TAG
from workers.contract.events import LOG, METRIC, RUNNER
from workers.contract.mlflow import (
    ARTIFACT_READ_BYTES,
    DEFAULT_EXPERIMENT_ID,
    INVALID_PARAMETER_VALUE,
    RESOURCE_DOES_NOT_EXIST,
    RESOURCE_EXHAUSTED,
    RUN_ARTIFACTS_DIR,
    ArtifactFile,
    Metric,
    MlflowError,
    Store,
    copy_body,
    experiment_object,
    run_object,
)

# The entry that marks a run an outside MLflow client started.
CLIENT_ENTRY = "mlflow:client"
CLIENT_TAG = "mlflow"
_STATUSES = {
    Run.Status.RUNNING: "RUNNING",
    Run.Status.SUCCEEDED: "FINISHED",
    Run.Status.FAILED: "FAILED",
    Run.Status.CANCELLED: "KILLED",
    Run.Status.LOST: "FAILED",
}
_ENDED = {
    "FINISHED": Run.Status.SUCCEEDED,
    "FAILED": Run.Status.FAILED,
    "KILLED": Run.Status.FAILED,
}


class DatabaseStore(Store):
    """The calls of one authenticated user."""

    def __init__(self, user: Any) -> None:
        self.user = user

    # -- experiments: projects --------------------------------------------------------------

    def _project(self, experiment_id: str) -> Project | None:
        if experiment_id == DEFAULT_EXPERIMENT_ID:
            project = default_project()
            return project if visible_projects(self.user).filter(pk=project.pk).exists() else None
        if not experiment_id.isdigit():
            return None
        return visible_projects(self.user).filter(pk=int(experiment_id)).first()

    @staticmethod
    def _experiment(project: Project, experiment_id: str | None = None) -> dict[str, Any]:
        return experiment_object(
            experiment_id or str(project.pk), project.slug, f"mlflow-artifacts:/{project.pk}"
        )

    def experiment_by_name(self, name: str) -> dict[str, Any] | None:
        project = visible_projects(self.user).filter(slug=name).first()
        if project is None:
            project = visible_projects(self.user).filter(name=name).order_by("pk").first()
        return None if project is None else self._experiment(project)

    def experiment(self, experiment_id: str) -> dict[str, Any] | None:
        project = self._project(experiment_id)
        return None if project is None else self._experiment(project, experiment_id)

    def create_experiment(self, name: str, tags: list[dict[str, str]]) -> str:
        raise MlflowError(
            INVALID_PARAMETER_VALUE,
            f"No npulab project '{name}' you can see. An MLflow experiment is an npulab "
            "project: set MLFLOW_EXPERIMENT_NAME to a project's slug, or create the project "
            "first.",
        )

    # -- runs ---------------------------------------------------------------------------------

    def create_run(
        self, experiment_id: str, name: str, start_time: int, tags: list[dict[str, str]]
    ) -> dict[str, Any]:
        project = self._project(experiment_id)
        if project is None:
            raise MlflowError(
                RESOURCE_DOES_NOT_EXIST, f"No Experiment with id={experiment_id} exists"
            )
        role = role_in(self.user, project)
        if not (self.user.is_superuser or role_at_least(role, Membership.Role.MEMBER)):
            raise MlflowError(
                INVALID_PARAMETER_VALUE,
                f"You may not log runs into project '{project.slug}': members and owners may.",
            )
        spec = kinds.validate({"kind": "training", "device_type": "cpu", "entry": CLIENT_ENTRY})
        now = timezone.now()
        run = Run(
            kind=spec["kind"],
            project=project,
            spec=spec,
            device_type=spec["device_type"],
            devices=spec["devices"],
            submitted_by=self.user,
            name=name[: Run._meta.get_field("name").max_length],
            tags=[CLIENT_TAG],
            status=Run.Status.RUNNING,
            started_at=now,
            last_heartbeat=now,
            queue_reason="",
        )
        run.save(force_insert=True)
        stamp = now.timestamp()
        events = [
            {
                "type": LOG,
                "time": stamp,
                "stream": RUNNER,
                "line": f"run started by an outside MLflow client of {self.user}",
            }
        ]
        events += [_sourced(TAG, stamp, key=t["key"], value=t["value"]) for t in tags]
        with transaction.atomic():
            store_events(run, events, now)
        return self.run(str(run.pk)) or {}

    def _client_run(self, run_id: str, lock: bool = False) -> Run | None:
        if not run_id.isdigit():
            return None
        runs = visible_runs(self.user, Run.objects.filter(spec__entry=CLIENT_ENTRY))
        if lock:
            runs = runs.select_for_update(of=("self",))
        return runs.filter(pk=int(run_id)).first()

    def run(self, run_id: str) -> dict[str, Any] | None:
        run = self._client_run(run_id)
        if run is None:
            return None
        params, tags = logged_parameters(run)
        return run_object(
            str(run.pk),
            str(run.project_id),
            run.name,
            _STATUSES.get(run.status, "RUNNING"),
            _ms(run.started_at or run.created),
            _ms(run.finished_at) if run.finished_at else None,
            f"mlflow-artifacts:/{run.project_id}/{run.pk}/artifacts",
            params,
            tags,
            {},
        )

    def update_run(self, run_id: str, status: str, end_time: int | None, name: str) -> None:
        with transaction.atomic():
            run = self._client_run(run_id, lock=True)
            if run is None:
                return
            fields = ["updated"]
            if name:
                run.name = name[: Run._meta.get_field("name").max_length]
                fields.append("name")
            wanted = _ENDED.get(status)
            if wanted is not None and run.status == Run.Status.RUNNING:
                run.transition_to(wanted)
                run.exit_reason = f"the MLflow client ended the run as {status}"
                fields += ["status", "finished_at", "exit_reason"]
            run.save(update_fields=fields)

    def log(
        self,
        run_id: str,
        metrics: list[Metric],
        params: list[tuple[str, str]],
        tags: list[tuple[str, str]],
    ) -> None:
        with transaction.atomic():
            run = self._client_run(run_id, lock=True)
            if run is None:
                raise MlflowError(RESOURCE_DOES_NOT_EXIST, f"Run with id={run_id} not found")
            logged = logged_parameters(run)[0]
            for key, value in params:
                if logged.get(key, value) != value:
                    raise MlflowError(
                        INVALID_PARAMETER_VALUE,
                        f"Changing param values is not allowed. Param with key='{key}' was "
                        f"already logged with value='{logged[key]}' for run ID='{run_id}'. "
                        f"Attempted logging new value '{value}'.",
                    )
            now = timezone.now()
            stamp = now.timestamp()
            events = [_metric_event(metric) for metric in metrics]
            events += [_sourced(PARAM, stamp, key=key, value=value) for key, value in params]
            events += [_sourced(TAG, stamp, key=key, value=value) for key, value in tags]
            store_events(run, events, now)
            Run.objects.filter(pk=run.pk).update(last_heartbeat=now)

    def delete_tag(self, run_id: str, key: str) -> None:
        run = self._client_run(run_id)
        if run is None or key not in logged_parameters(run)[1]:
            raise MlflowError(
                INVALID_PARAMETER_VALUE, f"No tag with name: {key} in run with id {run_id}"
            )
        now = timezone.now()
        event = _sourced(TAG, now.timestamp(), key=key, value="", deleted=True)
        with transaction.atomic():
            store_events(run, [event], now)

    def search_runs(self, experiment_ids: list[str], max_results: int) -> list[dict[str, Any]]:
        projects = [p.pk for p in map(self._project, experiment_ids) if p is not None]
        runs = visible_runs(
            self.user, Run.objects.filter(spec__entry=CLIENT_ENTRY, project__in=projects)
        ).order_by("-pk")[:max_results]
        found = [self.run(str(run.pk)) for run in runs]
        return [run for run in found if run is not None]

    def metric_history(self, run_id: str, key: str) -> list[dict[str, Any]]:
        found = find(Owner.of_run(int(run_id), MLFLOW), key)
        if found is None:
            return []
        columns = whole(found).columns
        steps, values, times = (columns[name].tolist() for name in ("step", "value", "time"))
        rows = zip(steps, values, times, strict=True)
        return [
            {"key": key, "value": value, "timestamp": int(at * 1000), "step": int(step)}
            for step, value, at in rows
        ]

    # -- artifacts: the run's artifacts of kind mlflow ------------------------------------------

    def _artifact_run(self, path: str) -> tuple[Run, str] | None:
        """The client run ``<project>/<run>/artifacts[/<rest>]`` names, and ``rest``."""
        parts = path.split("/", 3)
        if len(parts) < 3 or parts[2] != RUN_ARTIFACTS_DIR:
            return None
        run = self._client_run(parts[1])
        if run is None or str(run.project_id) != parts[0]:
            return None
        return run, parts[3] if len(parts) > 3 else ""

    def put_artifact(self, path: str, body: BinaryIO, size: int) -> None:
        found = self._artifact_run(path)
        if found is None or not found[1]:
            raise MlflowError(RESOURCE_DOES_NOT_EXIST, f"No run's artifact path {path!r}")
        run, name = found
        with _store_errors():
            # Refused before a byte is read: past the size limit, a quota or the free space.
            check_size(MLFLOW, size)
            check_room(run.pk, size)
            with tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES) as spool:
                digest = hashlib.sha256()

                def keep(block: bytes) -> None:
                    digest.update(block)
                    spool.write(block)

                copy_body(body, size, keep)
                spool.seek(0)
                upload = do_create_upload(
                    run, run.attempt, name=name, kind=MLFLOW, size=size, sha256=digest.hexdigest()
                )
                if size:
                    blocks = iter(lambda: spool.read(ARTIFACT_READ_BYTES), b"")
                    try:
                        upload = do_append_chunk(upload.pk, 0, blocks)
                    except StoreFull as full:
                        # A client does not resume: its declared bytes must not hold the
                        # quota until the upload expires.
                        do_damage_upload(upload, full.detail["detail"])
                        raise
        if upload.artifact.status != Artifact.Status.STORED:
            raise MlflowError(
                INVALID_PARAMETER_VALUE,
                f"The artifact {name!r} was not stored: {upload.artifact.status_reason}",
            )

    def _stored(self, run: Run) -> Any:
        return Artifact.objects.filter(run=run, kind=MLFLOW, status=Artifact.Status.STORED)

    def list_artifacts(self, path: str) -> list[dict[str, Any]]:
        found = self._artifact_run(path)
        if found is None:
            return []
        run, folder = found
        prefix = folder + "/" if folder else ""
        listed: dict[str, dict[str, Any]] = {}
        for name, size in self._stored(run).values_list("name", "bytes"):
            if not name.startswith(prefix):
                continue
            head, below, _ = name[len(prefix) :].partition("/")
            if below:
                listed.setdefault(head, {"path": head, "is_dir": True})
            else:
                listed[head] = {"path": head, "is_dir": False, "file_size": size}
        return [listed[name] for name in sorted(listed)]

    def get_artifact(self, path: str) -> ArtifactFile:
        found = self._artifact_run(path)
        artifact = None
        if found is not None:
            artifact = self._stored(found[0]).filter(name=found[1]).first()
        if artifact is None:
            raise MlflowError(RESOURCE_DOES_NOT_EXIST, f"No artifact at {path!r}")
        return ArtifactFile(open_artifact(artifact), artifact.bytes)


@contextmanager
def _store_errors() -> Iterator[None]:
    """The artifact store's refusals, in MLflow's error shape."""
    try:
        yield
    except (ArtifactTooLarge, NoRoom, StoreFull) as exc:
        raise MlflowError(RESOURCE_EXHAUSTED, str(exc.detail["detail"])) from None
    except NameUnusable as exc:
        raise MlflowError(INVALID_PARAMETER_VALUE, " ".join(exc.detail["name"])) from None


def _sourced(kind: str, stamp: float, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "time": stamp, **fields, SOURCE_FIELD: MLFLOW}


def _metric_event(metric: Metric) -> dict[str, Any]:
    key, value, timestamp, step = metric
    event: dict[str, Any] = {"type": METRIC, "time": timestamp / 1000.0, "key": key, "step": step}
    if value != value or value in (float("inf"), float("-inf")):
        event["value"] = None
        event["nonfinite"] = repr(value)
    else:
        event["value"] = value
    event[SOURCE_FIELD] = MLFLOW
    return event


def _ms(when: Any) -> int:
    return int(when.timestamp() * 1000)
