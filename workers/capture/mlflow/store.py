"""A run's MLflow experiments and runs, kept in memory and written to events.jsonl as they come.

The run the supervisor names in ``MLFLOW_RUN_ID`` is the npulab run itself: its metrics keep
their keys. Any other MLflow run the script starts (a hyper-parameter loop, a nested run)
keeps its points apart under its name as a prefix (``trial-2/loss``); the run page shows the
prefix as the MLflow run. Metric histories are kept for ``get-history`` up to a bound.

Artifacts are files under the run directory's ``mlflow-artifacts/``: written there by the
client through the ``file://`` artifact URI the runs have, or uploaded through the
mlflow-artifacts API. Each is announced as an artifact of kind ``mlflow`` named by its
path under its MLflow run's artifacts, prefixed like the run's metrics, so the host
worker stores it as the platform's ``/mlflow/`` stores an outside client's.
"""

from __future__ import annotations

import errno
import os
import tempfile
import threading
import uuid
from typing import Any, BinaryIO

from workers.capture.sink import Sink
from workers.contract.capture import MAX_CAPTURED_KEYS, MLFLOW, PARAM, SOURCE_FIELD, TAG
from workers.contract.events import RUNNER
from workers.contract.mlflow import (
    DEFAULT_EXPERIMENT_ID,
    DEFAULT_EXPERIMENT_NAME,
    INVALID_PARAMETER_VALUE,
    LOGGED_MODEL_PENDING,
    RESOURCE_DOES_NOT_EXIST,
    RESOURCE_EXHAUSTED,
    RUN_ARTIFACTS_DIR,
    RUN_NAME_TAG,
    ArtifactFile,
    Metric,
    MlflowError,
    Store,
    artifact_path,
    copy_body,
    experiment_object,
    logged_model_object,
    metric_object,
    run_object,
)
from workers.events import EventWriter

# Points kept in memory for get-history, all runs together.
MAX_HISTORY_POINTS = 1_000_000
ARTIFACTS_DIR = "mlflow-artifacts"
# Uploads are written here first, then moved into ARTIFACTS_DIR whole.
UPLOADS_DIR = ".mlflow-uploads"
_TERMINAL = ("FINISHED", "FAILED", "KILLED")
# Where a logged model's files go among its run's artifacts: ``models/<name>/MLmodel``.
MODELS_DIR = "models"


class _Run:
    def __init__(self, run_id: str, experiment_id: str, name: str, prefix: str, start: int):
        self.run_id = run_id
        self.experiment_id = experiment_id
        self.name = name
        self.prefix = prefix
        self.status = "RUNNING"
        self.start = start
        self.end: int | None = None
        self.params: dict[str, str] = {}
        self.tags: dict[str, str] = {RUN_NAME_TAG: name}
        self.latest: dict[str, Metric] = {}
        self.history: dict[str, list[Metric]] = {}
        # Read or logged to by the script (for the run's own: see create_run).
        self.used = False


class _Model:
    def __init__(self, model_id: str, run: _Run, experiment_id: str, name: str, created: int):
        self.model_id = model_id
        self.run = run
        self.experiment_id = experiment_id
        self.name = name
        self.created = created
        self.updated = created
        self.status = LOGGED_MODEL_PENDING
        self.model_type = ""
        self.params: dict[str, str] = {}
        self.tags: dict[str, str] = {}


class EventsStore(Store):
    """The supervisor's store: calls become events; state stays for the script to read."""

    def __init__(self, events: EventWriter, run_dir: str, experiment: str, run_name: str) -> None:
        self.events = events
        self.run_dir = run_dir
        self.sink = Sink(events, MLFLOW, MAX_CAPTURED_KEYS)
        self._lock = threading.Lock()
        self._experiments: dict[str, tuple[str, str]] = {
            DEFAULT_EXPERIMENT_ID: (DEFAULT_EXPERIMENT_NAME, self._artifact_root("0"))
        }
        self._experiment_tags: dict[str, dict[str, str]] = {}
        self._runs: dict[str, _Run] = {}
        self._names: set = set()
        self._models: dict[str, _Model] = {}
        # Each run's models' folders: a second model of a name gets "-2".
        self._model_folders: set[tuple[str, str]] = set()
        self._kept = 0
        self._artifacts_sent: dict[str, tuple[int, float]] = {}
        self.experiment_id = self.create_experiment(experiment, [])
        self.run_id = uuid.uuid4().hex
        self._runs[self.run_id] = _Run(self.run_id, self.experiment_id, run_name, "", 0)

    def _artifact_root(self, experiment_id: str) -> str:
        return "file://" + os.path.join(self.run_dir, ARTIFACTS_DIR, experiment_id)

    def _artifact_uri(self, run: _Run) -> str:
        return self._artifact_root(run.experiment_id) + "/" + run.run_id + "/artifacts"

    def experiment_by_name(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            for experiment_id, (known, location) in self._experiments.items():
                if known == name:
                    tags = self._experiment_tags.get(experiment_id)
                    return experiment_object(experiment_id, known, location, tags)
        return None

    def experiment(self, experiment_id: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._experiments.get(experiment_id)
            tags = self._experiment_tags.get(experiment_id)
        return None if found is None else experiment_object(experiment_id, *found, tags)

    def create_experiment(self, name: str, tags: list[dict[str, str]]) -> str:
        with self._lock:
            experiment_id = str(len(self._experiments))
            self._experiments[experiment_id] = (name, self._artifact_root(experiment_id))
            if tags:
                self._experiment_tags[experiment_id] = {t["key"]: t["value"] for t in tags}
        return experiment_id

    def set_experiment_tag(self, experiment_id: str, key: str, value: str | None) -> None:
        # Kept for the script to read back: npulab's experiment is the run itself.
        with self._lock:
            tags = self._experiment_tags.setdefault(experiment_id, {})
            if value is None:
                tags.pop(key, None)
            else:
                tags[key] = value

    def create_run(
        self, experiment_id: str, name: str, start_time: int, tags: list[dict[str, str]]
    ) -> dict[str, Any]:
        with self._lock:
            own = self._runs[self.run_id]
            if not name and not own.used:
                # A client that makes its run rather than resume MLFLOW_RUN_ID (Lightning's
                # MLFlowLogger): its first, unnamed, is the run's own, its keys as they are,
                # so that they compare with other runs' (a prefix would be random).
                own.used = True
                own.experiment_id = experiment_id
                own.start = start_time
                run = own
            else:
                run_id = uuid.uuid4().hex
                name = name or run_id[:8]
                prefix = name
                number = 2
                while prefix in self._names:
                    prefix = f"{name}-{number}"
                    number += 1
                self._names.add(prefix)
                run = _Run(run_id, experiment_id, name, prefix, start_time)
                self._runs[run_id] = run
        if run is own:
            said = "is this run's own: its metrics keep their keys"
        else:
            said = f"started: its metrics are {run.prefix}/<key>"
        self.events.log(RUNNER, f"MLflow run {run.name!r} (id {run.run_id}) {said}")
        self.log(run.run_id, [], [], [(t["key"], t["value"]) for t in tags])
        return self.run(run.run_id) or {}

    def _find(self, run_id: str) -> _Run | None:
        """The run ``run_id``, now used (called with the lock held)."""
        run = self._runs.get(run_id)
        if run is not None:
            run.used = True
        return run

    def run(self, run_id: str) -> dict[str, Any] | None:
        with self._lock:
            run = self._find(run_id)
            if run is None:
                return None
            if run.start == 0:
                run.start = int(1000 * _now())
            return run_object(
                run.run_id,
                run.experiment_id,
                run.name,
                run.status,
                run.start,
                run.end,
                self._artifact_uri(run),
                dict(run.params),
                dict(run.tags),
                dict(run.latest),
            )

    def update_run(self, run_id: str, status: str, end_time: int | None, name: str) -> None:
        with self._lock:
            run = self._runs[run_id]
            changed = status and status != run.status
            run.status = status or run.status
            run.end = end_time if end_time is not None else run.end
            run.name = name or run.name
        if changed:
            self.events.log(RUNNER, f"MLflow run {run.name!r} (id {run_id}) is {run.status}")
        if run.status in _TERMINAL:
            self.send_artifacts()

    def log(
        self,
        run_id: str,
        metrics: list[Metric],
        params: list[tuple[str, str]],
        tags: list[tuple[str, str]],
    ) -> None:
        with self._lock:
            run = self._find(run_id)
            if run is None:
                raise MlflowError(RESOURCE_DOES_NOT_EXIST, f"Run with id={run_id} not found")
            for key, value in params:
                if run.params.get(key, value) != value:
                    raise MlflowError(
                        INVALID_PARAMETER_VALUE,
                        f"Changing param values is not allowed. Param with key='{key}' was "
                        f"already logged with value='{run.params[key]}' for run ID='{run_id}'. "
                        f"Attempted logging new value '{value}'.",
                    )
            for key, value in params:
                run.params[key] = value
            for key, value in tags:
                run.tags[key] = value
                if key == RUN_NAME_TAG and value:
                    run.name = value
            prefix = run.prefix + "/" if run.prefix else ""
            # Past the bound on keys, a new key's points are neither written nor kept.
            metrics = [m for m in metrics if self.sink.accept(prefix + m[0])]
            for metric in metrics:
                key = metric[0]
                latest = run.latest.get(key)
                if latest is None or (metric[3], metric[2]) >= (latest[3], latest[2]):
                    run.latest[key] = metric
                if self._kept < MAX_HISTORY_POINTS:
                    run.history.setdefault(key, []).append(metric)
                    self._kept += 1
        if self._kept >= MAX_HISTORY_POINTS and metrics:
            self.sink.notice(
                "history",
                f"over {MAX_HISTORY_POINTS} points: get-history answers the first ones "
                "(every point is stored in the run all the same)",
            )
        self.sink.write(
            [
                (prefix + key, step, value, timestamp / 1000.0)
                for key, value, timestamp, step in metrics
            ]
        )
        for key, value in params:
            self.events.emit(PARAM, key=prefix + key, value=value, **{SOURCE_FIELD: MLFLOW})
        for key, value in tags:
            self.events.emit(TAG, key=prefix + key, value=value, **{SOURCE_FIELD: MLFLOW})

    def delete_tag(self, run_id: str, key: str) -> None:
        with self._lock:
            run = self._runs[run_id]
            if key not in run.tags:
                raise MlflowError(
                    INVALID_PARAMETER_VALUE, f"No tag with name: {key} in run with id {run_id}"
                )
            del run.tags[key]
            prefix = run.prefix + "/" if run.prefix else ""
        self.events.emit(TAG, key=prefix + key, value="", deleted=True, **{SOURCE_FIELD: MLFLOW})

    def search_runs(self, experiment_ids: list[str], max_results: int) -> list[dict[str, Any]]:
        with self._lock:
            ids = [r.run_id for r in self._runs.values() if r.experiment_id in experiment_ids]
        found = [self.run(run_id) for run_id in ids[:max_results]]
        return [run for run in found if run is not None]

    def metric_history(self, run_id: str, key: str) -> list[dict[str, Any]]:
        with self._lock:
            points = list(self._runs[run_id].history.get(key, []))
        return [metric_object(point) for point in points]

    def create_logged_model(
        self,
        experiment_id: str,
        name: str,
        source_run_id: str,
        model_type: str,
        params: list[tuple[str, str]],
        tags: list[tuple[str, str]],
    ) -> dict[str, Any]:
        # A model's files are its run's artifacts (models/<name>/...), stored with the run
        # as the run ends; one logged outside any run goes with the npulab run's.
        model_id = "m-" + uuid.uuid4().hex
        with self._lock:
            run = self._find(source_run_id or self.run_id)
            if run is None:
                raise MlflowError(RESOURCE_DOES_NOT_EXIST, f"Run with id={source_run_id} not found")
            wanted = artifact_path(name or "model").replace("/", "-")
            folder, number = wanted, 2
            while (run.run_id, folder) in self._model_folders:
                folder = f"{wanted}-{number}"
                number += 1
            self._model_folders.add((run.run_id, folder))
            model = _Model(model_id, run, experiment_id, folder, int(1000 * _now()))
            model.model_type = model_type
            model.params.update(params)
            model.tags.update(tags)
            self._models[model_id] = model
        where = f"{run.prefix}/{MODELS_DIR}" if run.prefix else MODELS_DIR
        self.events.log(
            RUNNER, f"MLflow model {folder!r} (id {model_id}): its files are {where}/{folder}/"
        )
        return self.logged_model(model_id) or {}

    def logged_model(self, model_id: str) -> dict[str, Any] | None:
        with self._lock:
            model = self._models.get(model_id)
            if model is None:
                return None
            return logged_model_object(
                model.model_id,
                model.experiment_id,
                model.name,
                model.created,
                model.updated,
                f"{self._artifact_uri(model.run)}/{MODELS_DIR}/{model.name}",
                model.status,
                model.run.run_id,
                model.model_type,
                dict(model.params),
                dict(model.tags),
            )

    def change_logged_model(
        self,
        model_id: str,
        status: str = "",
        params: list[tuple[str, str]] | None = None,
        tags: list[tuple[str, str]] | None = None,
        deleted_tag: str = "",
    ) -> None:
        with self._lock:
            model = self._models[model_id]
            model.status = status or model.status
            model.params.update(params or [])
            model.tags.update(tags or [])
            model.tags.pop(deleted_tag, None)
            model.updated = int(1000 * _now())
        if status:
            self.events.log(RUNNER, f"MLflow model {model.name!r} (id {model_id}) is {status}")

    def search_logged_models(self, experiment_ids: list[str]) -> list[dict[str, Any]]:
        with self._lock:
            ids = [m.model_id for m in self._models.values() if m.experiment_id in experiment_ids]
        found = [self.logged_model(model_id) for model_id in ids]
        return [model for model in found if model is not None]

    def log_outputs(self, run_id: str, outputs: list[tuple[str, int]]) -> None:
        for model_id, step in outputs:
            with self._lock:
                name = self._models[model_id].name
            self.events.log(RUNNER, f"MLflow model {name!r} (id {model_id}) logged at step {step}")

    def _artifact_file(self, path: str) -> str:
        return os.path.join(self.run_dir, ARTIFACTS_DIR, *path.split("/"))

    def put_artifact(self, path: str, body: BinaryIO, size: int) -> None:
        target = self._artifact_file(path)
        uploads = os.path.join(self.run_dir, UPLOADS_DIR)
        try:
            os.makedirs(uploads, exist_ok=True)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=uploads, delete=False) as part:
                try:
                    copy_body(body, size, part.write)
                except BaseException:
                    os.unlink(part.name)
                    raise
            os.replace(part.name, target)
        except OSError as exc:
            code = RESOURCE_EXHAUSTED if exc.errno in (errno.ENOSPC, errno.EDQUOT) else None
            raise MlflowError(
                code or INVALID_PARAMETER_VALUE,
                f"The artifact {path!r} was not written: {exc.strerror}",
            ) from None

    def list_artifacts(self, path: str) -> list[dict[str, Any]]:
        try:
            entries = sorted(os.scandir(self._artifact_file(path)), key=lambda e: e.name)
        except OSError:
            return []  # nothing there, or a file: MLflow lists neither
        listed = []
        for entry in entries:
            if entry.is_dir():
                listed.append({"path": entry.name, "is_dir": True})
            elif entry.is_file():
                size = entry.stat().st_size
                listed.append({"path": entry.name, "is_dir": False, "file_size": size})
        return listed

    def get_artifact(self, path: str) -> ArtifactFile:
        target = self._artifact_file(path)
        try:
            stream = open(target, "rb")  # noqa: SIM115 (the server closes it once sent)
        except OSError:
            raise MlflowError(RESOURCE_DOES_NOT_EXIST, f"No artifact at {path!r}") from None
        return ArtifactFile(stream, os.fstat(stream.fileno()).st_size)

    def _artifact_name(self, relative: str) -> str:
        """The name an artifact file under ARTIFACTS_DIR is announced by: its path under its
        MLflow run's artifacts, after the run's prefix (as its metrics have)."""
        parts = relative.split(os.sep)
        with self._lock:
            run = self._runs.get(parts[1]) if len(parts) > 3 else None
        if run is None or parts[2] != RUN_ARTIFACTS_DIR:
            return "/".join(parts)
        rest = "/".join(parts[3:])
        return f"{run.prefix}/{rest}" if run.prefix else rest

    def send_artifacts(self) -> None:
        """An artifact event for each file written under an artifact URI since the last call."""
        root = os.path.join(self.run_dir, ARTIFACTS_DIR)
        for top, _, files in os.walk(root):
            for name in sorted(files):
                path = os.path.join(top, name)
                try:
                    stat = os.stat(path)
                except OSError:
                    continue
                mark = (stat.st_size, stat.st_mtime)
                if self._artifacts_sent.get(path) == mark:
                    continue
                self._artifacts_sent[path] = mark
                relative = os.path.relpath(path, root)
                try:
                    self.events.artifact(
                        artifact_path(self._artifact_name(relative)), path, kind=MLFLOW
                    )
                except MlflowError as exc:
                    self.sink.notice("artifact:" + path, f"{relative!r} not stored: {exc.message}")
                except OSError as exc:
                    self.sink.notice("artifact:" + path, f"{relative} not stored: {exc}")


def _now() -> float:
    import time

    return time.time()
