"""The MLflow REST tracking API: routes, limits and error shape, for any store behind them.

Served twice: by the supervisor on 127.0.0.1 for a run's own script
(workers.capture.mlflow, calls become events in events.jsonl), and by the platform under
``/mlflow/`` for outside clients with an npulab token (npulab.mlflow). Both hand a request
to ``handle`` with a ``Store`` of their own, so the two answer alike, and as MLflow does:
its limits (1,000 metrics, 100 params, 100 tags a batch; params up to 6,000 characters,
tags up to 8,000) and its errors ``{"error_code": ..., "message": ...}`` with its status
codes. What is not implemented answers ENDPOINT_NOT_FOUND at once. Standard library only.

Artifacts go through MLflow's proxied artifact API (``mlflow-artifacts``, as ``mlflow
server --serve-artifacts`` serves it): ``handle_artifacts`` checks the path (relative, no
``..``, no NUL, no backslash) before a store sees it, and streams the bodies both ways.
"""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any, BinaryIO, Callable, Dict, NamedTuple, Tuple, Union

PREFIX = "/api/2.0/mlflow/"
ARTIFACTS_ROOT = "/api/2.0/mlflow-artifacts/artifacts"
ARTIFACTS_PREFIX = ARTIFACTS_ROOT + "/"
# The folder under an MLflow run's artifact root, as MLflow names it (``<exp>/<run>/artifacts``).
RUN_ARTIFACTS_DIR = "artifacts"

INVALID_PARAMETER_VALUE = "INVALID_PARAMETER_VALUE"
RESOURCE_DOES_NOT_EXIST = "RESOURCE_DOES_NOT_EXIST"
RESOURCE_ALREADY_EXISTS = "RESOURCE_ALREADY_EXISTS"
ENDPOINT_NOT_FOUND = "ENDPOINT_NOT_FOUND"
RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
STATUS_CODES = {
    INVALID_PARAMETER_VALUE: 400,
    RESOURCE_ALREADY_EXISTS: 400,
    RESOURCE_DOES_NOT_EXIST: 404,
    ENDPOINT_NOT_FOUND: 404,
    # MLflow answers 429, which its client retries with back-off for minutes; a full store
    # does not empty in that time, so the script hears it at once, as the artifact store's
    # own uploads say it (507 Insufficient Storage).
    RESOURCE_EXHAUSTED: 507,
}

MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
MAX_TAGS_PER_BATCH = 100
MAX_ENTITIES_PER_BATCH = 1000
MAX_PARAM_VALUE_CHARS = 6000
MAX_TAG_VALUE_CHARS = 8000
MAX_KEY_CHARS = 250
MAX_BODY_BYTES = 16 * 1024 * 1024
# An artifact's path is its name in the run's artifact store, which keeps 255 characters.
MAX_ARTIFACT_PATH_CHARS = 255
ARTIFACT_READ_BYTES = 1 << 20
RUN_STATUSES = ("RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED")
LOGGED_MODEL_PENDING = "LOGGED_MODEL_PENDING"
LOGGED_MODEL_STATUSES = (LOGGED_MODEL_PENDING, "LOGGED_MODEL_READY", "LOGGED_MODEL_UPLOAD_FAILED")
# The input tag MLflow's client says a dataset's use by ("training", "eval").
DATASET_CONTEXT = "mlflow.data.context"
DEFAULT_EXPERIMENT_ID = "0"
DEFAULT_EXPERIMENT_NAME = "Default"
# The tag MLflow's client gives a run its name by.
RUN_NAME_TAG = "mlflow.runName"
PARENT_RUN_TAG = "mlflow.parentRunId"
# The run tag MLflow 2's log_model records each model's metadata in, a JSON list.
LOGGED_MODELS_TAG = "mlflow.log-model.history"

# (status, JSON body)
Reply = Tuple[int, Dict[str, Any]]


class ArtifactFile(NamedTuple):
    """An artifact's bytes, for a download: an open binary file and its size."""

    stream: BinaryIO
    size: int


# (status, JSON body or the file a download sends)
ArtifactReply = Tuple[int, Union[Dict[str, Any], ArtifactFile]]
# (key, value, timestamp in ms, step)
Metric = Tuple[str, float, int, int]


class MlflowError(Exception):
    """An error MLflow's client understands: its code, message and HTTP status."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def status(self) -> int:
        return STATUS_CODES.get(self.code, 400)

    def body(self) -> dict[str, Any]:
        return {"error_code": self.code, "message": self.message}


class Store:
    """Where the calls land; each server has its own. Runs are MLflow's JSON objects."""

    def experiment_by_name(self, name: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def experiment(self, experiment_id: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def create_experiment(self, name: str, tags: list[dict[str, str]]) -> str:
        raise NotImplementedError

    def create_run(
        self, experiment_id: str, name: str, start_time: int, tags: list[dict[str, str]]
    ) -> dict[str, Any]:
        raise NotImplementedError

    def run(self, run_id: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def update_run(self, run_id: str, status: str, end_time: int | None, name: str) -> None:
        raise NotImplementedError

    def log(
        self,
        run_id: str,
        metrics: list[Metric],
        params: list[tuple[str, str]],
        tags: list[tuple[str, str]],
    ) -> None:
        """Store a batch. MlflowError RESOURCE_DOES_NOT_EXIST for a run it does not have (a
        log call is checked here, not with ``run``, which builds the whole run each call),
        INVALID_PARAMETER_VALUE for a param already logged with another value."""
        raise NotImplementedError

    def delete_tag(self, run_id: str, key: str) -> None:
        raise NotImplementedError

    def search_runs(self, experiment_ids: list[str], max_results: int) -> list[dict[str, Any]]:
        raise NotImplementedError

    def metric_history(self, run_id: str, key: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    # Artifacts: ``path`` is under the artifact root (``<experiment>/<run>/artifacts/...``)
    # and has passed ``artifact_path``.

    def put_artifact(self, path: str, body: BinaryIO, size: int) -> None:
        """Store the ``size`` bytes ``body`` holds as the artifact at ``path``."""
        raise MlflowError(ENDPOINT_NOT_FOUND, "artifact upload is not served here")

    def list_artifacts(self, path: str) -> list[dict[str, Any]]:
        """The files and folders right under ``path``: ``{"path": name, "is_dir", "file_size"}``."""
        raise MlflowError(ENDPOINT_NOT_FOUND, "artifact listing is not served here")

    def get_artifact(self, path: str) -> ArtifactFile:
        raise MlflowError(ENDPOINT_NOT_FOUND, "artifact download is not served here")

    def set_experiment_tag(self, experiment_id: str, key: str, value: str | None) -> None:
        """Set a tag of an experiment; ``None`` deletes it."""
        raise MlflowError(
            ENDPOINT_NOT_FOUND,
            "experiment tags are kept by the runs npulab executes, not here: an npulab "
            "project keeps none",
        )

    # Logged models (MLflow 3's ``log_model``): MLflow's LoggedModel JSON objects.
    _NO_MODELS = (
        "logged models are kept by the runs npulab executes (their files among the run's "
        "artifacts), not here: log the model's files with mlflow.log_artifacts"
    )

    def create_logged_model(
        self,
        experiment_id: str,
        name: str,
        source_run_id: str,
        model_type: str,
        params: list[tuple[str, str]],
        tags: list[tuple[str, str]],
    ) -> dict[str, Any]:
        raise MlflowError(ENDPOINT_NOT_FOUND, self._NO_MODELS)

    def logged_model(self, model_id: str) -> dict[str, Any] | None:
        return None

    def change_logged_model(
        self,
        model_id: str,
        status: str = "",
        params: list[tuple[str, str]] | None = None,
        tags: list[tuple[str, str]] | None = None,
        deleted_tag: str = "",
    ) -> None:
        """Finalize a logged model (``status``), add its params or tags, or delete a tag."""
        raise MlflowError(ENDPOINT_NOT_FOUND, self._NO_MODELS)

    def search_logged_models(self, experiment_ids: list[str]) -> list[dict[str, Any]]:
        return []

    def log_outputs(self, run_id: str, outputs: list[tuple[str, int]]) -> None:
        """The run made these logged models: ``(model_id, step)``."""
        raise MlflowError(ENDPOINT_NOT_FOUND, self._NO_MODELS)


def is_artifact_request(path: str) -> bool:
    """Whether ``path`` is one of the mlflow-artifacts API (served by ``handle_artifacts``)."""
    return path == ARTIFACTS_ROOT or path.startswith(ARTIFACTS_PREFIX)


def artifact_path(raw: str) -> str:
    """``raw`` if it is a path an artifact may have: relative, folders by ``/``, no ``.`` or
    ``..`` part, no NUL or backslash, at most MAX_ARTIFACT_PATH_CHARS; MlflowError if not."""
    parts = raw.split("/")
    if (
        not raw
        or len(raw) > MAX_ARTIFACT_PATH_CHARS
        or "\x00" in raw
        or "\\" in raw
        or any(part in ("", ".", "..") for part in parts)
        or not raw.isprintable()
    ):
        shown = raw[:80].encode("unicode_escape").decode("ascii")
        raise MlflowError(
            INVALID_PARAMETER_VALUE,
            f"Invalid artifact path: '{shown}'. An artifact path is relative, with no '.' or "
            f"'..' part, no NUL, backslash or control character, and at most "
            f"{MAX_ARTIFACT_PATH_CHARS} characters.",
        )
    return raw


def handle_artifacts(
    store: Store,
    method: str,
    path: str,
    query: dict[str, str],
    body: BinaryIO,
    size: int | None,
) -> ArtifactReply:
    """Answer one request of the mlflow-artifacts API; never raises for a client's mistake.

    ``GET <root>?path=`` lists, ``PUT <root>/<path>`` uploads (``size`` is its
    Content-Length), ``GET <root>/<path>`` downloads. The body is read by the store, in
    blocks: an artifact is never held in memory whole.
    """
    try:
        if path == ARTIFACTS_ROOT and method == "GET":
            listed = query.get("path") or ""
            files = store.list_artifacts(artifact_path(listed.strip("/")) if listed else "")
            return 200, {"files": files} if files else {}
        relative = path[len(ARTIFACTS_PREFIX) :] if path.startswith(ARTIFACTS_PREFIX) else None
        if relative is None or method not in ("GET", "PUT"):
            raise MlflowError(ENDPOINT_NOT_FOUND, f"No endpoint {method} {path} is served here.")
        relative = artifact_path(relative)
        if method == "GET":
            return 200, store.get_artifact(relative)
        if size is None:
            raise MlflowError(INVALID_PARAMETER_VALUE, "An artifact upload needs a Content-Length.")
        store.put_artifact(relative, body, size)
        return 200, {}
    except MlflowError as exc:
        return exc.status, exc.body()


def copy_body(body: BinaryIO, size: int, write: Callable[[bytes], Any]) -> None:
    """Hand the ``size`` bytes of an upload's body to ``write`` block by block; MlflowError if
    the body ends before them."""
    left = size
    while left > 0:
        block = body.read(min(ARTIFACT_READ_BYTES, left))
        if not block:
            raise MlflowError(
                INVALID_PARAMETER_VALUE,
                f"The upload ended after {size - left} of its {size} bytes.",
            )
        write(block)
        left -= len(block)


def handle(store: Store, method: str, path: str, query: dict[str, str], body: bytes) -> Reply:
    """Answer one request of the tracking API; never raises for a client's mistake."""
    try:
        served = path[len(PREFIX) :] if path.startswith(PREFIX) else None
        route = _ROUTES.get((method, served))
        by_id = served is not None and route is None and served.startswith(_LOGGED_MODEL)
        if route is None and not by_id:
            raise MlflowError(ENDPOINT_NOT_FOUND, f"No endpoint {method} {path} is served here.")
        if method in ("GET", "DELETE"):
            request = dict(query)
        else:
            if len(body) > MAX_BODY_BYTES:
                raise MlflowError(INVALID_PARAMETER_VALUE, "The request body is too large.")
            try:
                request = json.loads(body.decode("utf-8") or "{}") if body else {}
            except ValueError as exc:
                raise MlflowError(INVALID_PARAMETER_VALUE, f"Malformed JSON: {exc}") from None
            if not isinstance(request, dict):
                raise MlflowError(INVALID_PARAMETER_VALUE, "The request body must be an object.")
        if route is not None:
            return 200, route(store, request)
        reply = _logged_model_call(store, method, served[len(_LOGGED_MODEL) :], request)
        if reply is None:
            raise MlflowError(ENDPOINT_NOT_FOUND, f"No endpoint {method} {path} is served here.")
        return 200, reply
    except MlflowError as exc:
        return exc.status, exc.body()


def _text(request: dict[str, Any], name: str, required: bool = True) -> str:
    value = request.get(name)
    if value is None or value == "":
        if required:
            raise MlflowError(
                INVALID_PARAMETER_VALUE, f"Missing value for required parameter '{name}'."
            )
        return ""
    if not isinstance(value, str):
        raise MlflowError(INVALID_PARAMETER_VALUE, f"Invalid value for parameter '{name}'.")
    return value


def _run_id(request: dict[str, Any]) -> str:
    return _text(request, "run_id", required=False) or _text(request, "run_uuid")


def _key(key: Any, what: str) -> str:
    if not isinstance(key, str) or not key:
        raise MlflowError(
            INVALID_PARAMETER_VALUE, f"Missing value for required parameter 'key' ({what})."
        )
    if len(key) > MAX_KEY_CHARS:
        raise MlflowError(
            INVALID_PARAMETER_VALUE,
            f"{what} '{key[:40]}...' had length {len(key)}, which exceeded length limit of "
            f"{MAX_KEY_CHARS}",
        )
    return key


def _value(value: Any, limit: int, what: str, key: str) -> str:
    text = "" if value is None else str(value)
    if len(text) > limit:
        raise MlflowError(
            INVALID_PARAMETER_VALUE,
            f"{what} value '{text[:40]}...' had length {len(text)}, which exceeded length "
            f"limit of {limit}",
        )
    return text


def _metric(item: Any) -> Metric:
    if not isinstance(item, dict):
        raise MlflowError(INVALID_PARAMETER_VALUE, "A metric must be an object.")
    key = _key(item.get("key"), "Metric name")
    raw = item.get("value")
    if (
        isinstance(raw, str) and raw.lower() in ("nan", "inf", "-inf", "infinity", "-infinity")
    ) or (isinstance(raw, (int, float)) and not isinstance(raw, bool)):
        value = float(raw)
    else:
        raise MlflowError(
            INVALID_PARAMETER_VALUE,
            f"Got invalid value {raw!r} for metric '{key}' (must be a number)",
        )
    timestamp = _integer(item.get("timestamp", int(time.time() * 1000)), "timestamp")
    step = _integer(item.get("step", 0) or 0, "step")
    return key, value, timestamp, step


def _integer(raw: Any, name: str) -> int:
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise MlflowError(
            INVALID_PARAMETER_VALUE, f"Invalid value for parameter '{name}'."
        ) from None
    if (isinstance(raw, float) and not math.isfinite(raw)) or not -(2**63) <= value < 2**63:
        raise MlflowError(INVALID_PARAMETER_VALUE, f"Invalid value for parameter '{name}'.")
    return value


def _pairs(items: Any, what: str, limit: int) -> list[tuple[str, str]]:
    if items is None:
        return []
    if not isinstance(items, list):
        raise MlflowError(INVALID_PARAMETER_VALUE, f"'{what}s' must be a list.")
    pairs = []
    for item in items:
        if not isinstance(item, dict):
            raise MlflowError(INVALID_PARAMETER_VALUE, f"A {what} must be an object.")
        key = _key(item.get("key"), f"{what.capitalize()} name")
        pairs.append((key, _value(item.get("value"), limit, what.capitalize(), key)))
    return pairs


def _known_experiment(store: Store, experiment_id: str) -> dict[str, Any]:
    found = store.experiment(experiment_id)
    if found is None:
        raise MlflowError(RESOURCE_DOES_NOT_EXIST, f"No Experiment with id={experiment_id} exists")
    return found


def _known_run(store: Store, run_id: str) -> dict[str, Any]:
    run = store.run(run_id)
    if run is None:
        raise MlflowError(RESOURCE_DOES_NOT_EXIST, f"Run with id={run_id} not found")
    return run


def _get_experiment_by_name(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    name = _text(request, "experiment_name")
    found = store.experiment_by_name(name)
    if found is None:
        raise MlflowError(RESOURCE_DOES_NOT_EXIST, f"Could not find experiment with name '{name}'")
    return {"experiment": found}


def _get_experiment(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    return {"experiment": _known_experiment(store, _text(request, "experiment_id"))}


def _create_experiment(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    name = _text(request, "name")
    if store.experiment_by_name(name) is not None:
        raise MlflowError(RESOURCE_ALREADY_EXISTS, f"Experiment '{name}' already exists.")
    tags = [
        {"key": k, "value": v} for k, v in _pairs(request.get("tags"), "tag", MAX_TAG_VALUE_CHARS)
    ]
    return {"experiment_id": store.create_experiment(name, tags)}


def _set_experiment_tag(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    experiment_id = _text(request, "experiment_id")
    _known_experiment(store, experiment_id)
    [(key, value)] = _pairs([request], "tag", MAX_TAG_VALUE_CHARS)
    store.set_experiment_tag(experiment_id, key, value)
    return {}


def _delete_experiment_tag(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    experiment_id = _text(request, "experiment_id")
    _known_experiment(store, experiment_id)
    store.set_experiment_tag(experiment_id, _key(request.get("key"), "Tag name"), None)
    return {}


def _search_experiments(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    found = store.experiment(DEFAULT_EXPERIMENT_ID)
    return {"experiments": [found] if found else []}


def _create_run(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    experiment_id = str(request.get("experiment_id") or DEFAULT_EXPERIMENT_ID)
    _known_experiment(store, experiment_id)
    tags = _pairs(request.get("tags"), "tag", MAX_TAG_VALUE_CHARS)
    name = _text(request, "run_name", required=False) or dict(tags).get(RUN_NAME_TAG, "")
    start = _integer(request.get("start_time", int(time.time() * 1000)), "start_time")
    run = store.create_run(experiment_id, name, start, [{"key": k, "value": v} for k, v in tags])
    return {"run": run}


def _get_run(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    return {"run": _known_run(store, _run_id(request))}


def _update_run(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    run_id = _run_id(request)
    _known_run(store, run_id)
    status = _text(request, "status", required=False)
    if status and status not in RUN_STATUSES:
        raise MlflowError(
            INVALID_PARAMETER_VALUE, f"Invalid value {status!r} for parameter 'status'."
        )
    end = request.get("end_time")
    name = _text(request, "run_name", required=False)
    store.update_run(run_id, status, None if end is None else _integer(end, "end_time"), name)
    return {"run_info": _known_run(store, run_id)["info"]}


def _log_metric(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    run_id = _run_id(request)
    metric = _metric(request)
    store.log(run_id, [metric], [], [])
    return {}


def _log_param(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    run_id = _run_id(request)
    params = _pairs([request], "param", MAX_PARAM_VALUE_CHARS)
    store.log(run_id, [], params, [])
    return {}


def _set_tag(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    run_id = _run_id(request)
    tags = _pairs([request], "tag", MAX_TAG_VALUE_CHARS)
    store.log(run_id, [], [], tags)
    return {}


def _delete_tag(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    run_id = _run_id(request)
    key = _key(request.get("key"), "Tag name")
    _known_run(store, run_id)
    store.delete_tag(run_id, key)
    return {}


def _log_batch(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    run_id = _run_id(request)
    metrics, params, tags = (request.get(name) or [] for name in ("metrics", "params", "tags"))
    for items, limit, what in (
        (metrics, MAX_METRICS_PER_BATCH, "metrics"),
        (params, MAX_PARAMS_PER_BATCH, "params"),
        (tags, MAX_TAGS_PER_BATCH, "tags"),
    ):
        if not isinstance(items, list):
            raise MlflowError(INVALID_PARAMETER_VALUE, f"'{what}' must be a list.")
        if len(items) > limit:
            raise MlflowError(
                INVALID_PARAMETER_VALUE,
                f"A batch logging request can contain at most {limit} {what}. Got "
                f"{len(items)} {what}. Please split up {what} across multiple requests and "
                "try again.",
            )
    total = len(metrics) + len(params) + len(tags)
    if total > MAX_ENTITIES_PER_BATCH:
        raise MlflowError(
            INVALID_PARAMETER_VALUE,
            f"A batch logging request can contain at most {MAX_ENTITIES_PER_BATCH} total "
            f"metrics, params, and tags. Got {len(metrics)} metrics, {len(params)} params, "
            f"and {len(tags)} tags. Please split up metrics, params, and tags across multiple "
            "requests and try again.",
        )
    checked = [_metric(item) for item in metrics]
    checked_params = _pairs(params, "param", MAX_PARAM_VALUE_CHARS)
    checked_tags = _pairs(tags, "tag", MAX_TAG_VALUE_CHARS)
    store.log(run_id, checked, checked_params, checked_tags)
    return {}


def _search_runs(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    ids = request.get("experiment_ids") or []
    if not isinstance(ids, list):
        raise MlflowError(INVALID_PARAMETER_VALUE, "'experiment_ids' must be a list.")
    limit = _integer(request.get("max_results", 1000), "max_results")
    if not 0 < limit <= 50000:
        raise MlflowError(
            INVALID_PARAMETER_VALUE, f"Invalid value {limit} for parameter 'max_results' supplied."
        )
    return {"runs": store.search_runs([str(i) for i in ids], limit)}


def _model_pairs(items: Any, what: str) -> list[tuple[str, str]]:
    return _pairs(items, what, MAX_TAG_VALUE_CHARS if what == "tag" else MAX_PARAM_VALUE_CHARS)


def _create_logged_model(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    experiment_id = _text(request, "experiment_id")
    _known_experiment(store, experiment_id)
    source_run_id = _text(request, "source_run_id", required=False)
    if source_run_id:
        _known_run(store, source_run_id)
    model = store.create_logged_model(
        experiment_id,
        _text(request, "name", required=False),
        source_run_id,
        _text(request, "model_type", required=False),
        _model_pairs(request.get("params"), "param"),
        _model_pairs(request.get("tags"), "tag"),
    )
    return {"model": model}


def _known_model(store: Store, model_id: str) -> dict[str, Any]:
    model = store.logged_model(model_id)
    if model is None:
        raise MlflowError(RESOURCE_DOES_NOT_EXIST, f"Logged model with ID '{model_id}' not found.")
    return model


def _logged_model_call(
    store: Store, method: str, rest: str, request: dict[str, Any]
) -> dict[str, Any] | None:
    """``logged-models/<id>`` and what is under it; None for a path or method not served."""
    model_id, _, under = rest.partition("/")
    if not model_id:
        return None
    if (method, under) == ("GET", ""):
        return {"model": _known_model(store, model_id)}
    if (method, under) == ("PATCH", ""):
        status = _text(request, "status")
        if status not in LOGGED_MODEL_STATUSES:
            raise MlflowError(
                INVALID_PARAMETER_VALUE, f"Invalid value {status!r} for parameter 'status'."
            )
        _known_model(store, model_id)
        store.change_logged_model(model_id, status=status)
    elif (method, under) == ("POST", "params"):
        _known_model(store, model_id)
        store.change_logged_model(model_id, params=_model_pairs(request.get("params"), "param"))
    elif (method, under) == ("PATCH", "tags"):
        _known_model(store, model_id)
        store.change_logged_model(model_id, tags=_model_pairs(request.get("tags"), "tag"))
    elif method == "DELETE" and under.startswith("tags/") and len(under) > len("tags/"):
        _known_model(store, model_id)
        store.change_logged_model(model_id, deleted_tag=under[len("tags/") :])
    else:
        return None
    return {"model": _known_model(store, model_id)} if method == "PATCH" and not under else {}


# What MLflow's client filters logged models by when it resolves ``runs:/<run>/<name>``.
_MODEL_FILTER = re.compile(r"^\s*(name|source_run_id|model_type)\s*=\s*'([^']*)'\s*$")
_AND = re.compile(r"(?<!\s)\s+AND\s+", re.IGNORECASE)


def _search_logged_models(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    ids = request.get("experiment_ids") or []
    if not isinstance(ids, list):
        raise MlflowError(INVALID_PARAMETER_VALUE, "'experiment_ids' must be a list.")
    wanted: dict[str, str] = {}
    text = _text(request, "filter", required=False)
    # Split where a run of spaces starts only: "\s+AND" tried at each space of a long run
    # is quadratic (20,000 spaces took 1.5 s).
    for clause in _AND.split(text) if text.strip() else []:
        found = _MODEL_FILTER.match(clause)
        if found is None:
            shown = clause.strip()
            raise MlflowError(
                INVALID_PARAMETER_VALUE,
                f"Unsupported filter {shown[:80]!r}{'...' if len(shown) > 80 else ''}: logged "
                "models are searched here by name = '...', source_run_id = '...' and "
                "model_type = '...', joined by AND.",
            )
        wanted[found.group(1)] = found.group(2)
    limit = _integer(request.get("max_results", 100), "max_results")
    models = [
        model
        for model in store.search_logged_models([str(i) for i in ids])
        if all(model["info"].get(field, "") == value for field, value in wanted.items())
    ]
    return {"models": models[: max(limit, 0)]}


def _record_logged_model(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    """MLflow 2's log_model: the model's metadata appended to the run's history tag, the
    newest kept where all would pass a tag's limit, one alone over it refused (the files
    are the run's artifacts already)."""
    run_id = _run_id(request)
    run = _known_run(store, run_id)
    try:
        model = json.loads(_text(request, "model_json"))
    except ValueError as exc:
        raise MlflowError(INVALID_PARAMETER_VALUE, f"Malformed model_json: {exc}") from None
    if not isinstance(model, dict):
        raise MlflowError(INVALID_PARAMETER_VALUE, "model_json must be an object.")
    tags = {tag["key"]: tag["value"] for tag in run["data"].get("tags", [])}
    try:
        history = json.loads(tags.get(LOGGED_MODELS_TAG) or "[]")
    except ValueError:
        history = []
    entries = [json.dumps(entry) for entry in history] if isinstance(history, list) else []
    entries.append(json.dumps(model))
    if len(entries[-1]) + 2 > MAX_TAG_VALUE_CHARS:
        raise MlflowError(
            INVALID_PARAMETER_VALUE,
            f"model_json had length {len(entries[-1])}, over the {MAX_TAG_VALUE_CHARS} "
            f"characters of the run's {LOGGED_MODELS_TAG} tag",
        )
    # "[" + entries joined by ", " + "]": the oldest go first until it fits.
    size = sum(len(entry) + 2 for entry in entries)
    while size > MAX_TAG_VALUE_CHARS:
        size -= len(entries.pop(0)) + 2
    store.log(run_id, [], [], [(LOGGED_MODELS_TAG, "[" + ", ".join(entries) + "]")])
    return {}


def _log_inputs(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    """Datasets a run read (``mlflow.log_input``), kept as the run's tags
    ``dataset.<name>``: npulab has no datasets of its own to show them by."""
    run_id = _run_id(request)
    datasets = request.get("datasets") or []
    if not isinstance(datasets, list):
        raise MlflowError(INVALID_PARAMETER_VALUE, "'datasets' must be a list.")
    tags = []
    for item in datasets:
        dataset = item.get("dataset") if isinstance(item, dict) else None
        if not isinstance(dataset, dict):
            raise MlflowError(INVALID_PARAMETER_VALUE, "A dataset input must hold a 'dataset'.")
        name = _key(dataset.get("name"), "Dataset name")
        said = [f"digest {_value(dataset.get('digest'), MAX_KEY_CHARS, 'Digest', name)}"]
        source = dataset.get("source_type")
        if source:
            said.append(f"source {_value(source, MAX_KEY_CHARS, 'Source type', name)}")
        context = dict(_pairs(item.get("tags"), "tag", MAX_TAG_VALUE_CHARS)).get(DATASET_CONTEXT)
        if context:
            said.append(f"context {context}")
        tags.append((_key("dataset." + name, "Tag name"), ", ".join(said)))
    store.log(run_id, [], [], tags)
    return {}


def _log_outputs(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    run_id = _run_id(request)
    _known_run(store, run_id)
    models = request.get("models") or []
    if not isinstance(models, list) or not all(isinstance(m, dict) for m in models):
        raise MlflowError(INVALID_PARAMETER_VALUE, "'models' must be a list of objects.")
    outputs = []
    for item in models:
        model_id = _text(item, "model_id")
        _known_model(store, model_id)
        outputs.append((model_id, _integer(item.get("step", 0) or 0, "step")))
    store.log_outputs(run_id, outputs)
    return {}


def _metric_history(store: Store, request: dict[str, Any]) -> dict[str, Any]:
    run_id = _run_id(request)
    key = _text(request, "metric_key")
    _known_run(store, run_id)
    return {"metrics": store.metric_history(run_id, key)}


_ROUTES: dict[tuple[str, str | None], Callable[[Store, dict[str, Any]], dict[str, Any]]] = {
    ("GET", "experiments/get-by-name"): _get_experiment_by_name,
    ("GET", "experiments/get"): _get_experiment,
    ("POST", "experiments/create"): _create_experiment,
    ("POST", "experiments/search"): _search_experiments,
    ("POST", "experiments/set-experiment-tag"): _set_experiment_tag,
    ("POST", "experiments/delete-experiment-tag"): _delete_experiment_tag,
    ("POST", "runs/create"): _create_run,
    ("GET", "runs/get"): _get_run,
    ("POST", "runs/update"): _update_run,
    ("POST", "runs/log-metric"): _log_metric,
    ("POST", "runs/log-parameter"): _log_param,
    ("POST", "runs/log-batch"): _log_batch,
    ("POST", "runs/set-tag"): _set_tag,
    ("POST", "runs/delete-tag"): _delete_tag,
    ("POST", "runs/search"): _search_runs,
    ("GET", "metrics/get-history"): _metric_history,
    ("POST", "logged-models/search"): _search_logged_models,
    ("POST", "logged-models"): _create_logged_model,
    ("POST", "runs/log-inputs"): _log_inputs,
    ("POST", "runs/log-model"): _record_logged_model,
    ("POST", "runs/outputs"): _log_outputs,
}
_LOGGED_MODEL = "logged-models/"


def run_object(
    run_id: str,
    experiment_id: str,
    name: str,
    status: str,
    start_time: int,
    end_time: int | None,
    artifact_uri: str,
    params: dict[str, str],
    tags: dict[str, str],
    latest: dict[str, Metric],
) -> dict[str, Any]:
    """A run as MLflow's API returns it."""
    info = {
        "run_id": run_id,
        "run_uuid": run_id,
        "run_name": name,
        "experiment_id": experiment_id,
        "status": status,
        "start_time": start_time,
        "artifact_uri": artifact_uri,
        "lifecycle_stage": "active",
    }
    if end_time is not None:
        info["end_time"] = end_time
    return {
        "info": info,
        "data": {
            "metrics": [metric_object(m) for m in latest.values()],
            "params": [{"key": k, "value": v} for k, v in params.items()],
            "tags": [{"key": k, "value": v} for k, v in tags.items()],
        },
    }


def metric_object(metric: Metric) -> dict[str, Any]:
    key, value, timestamp, step = metric
    shown: Any = (
        value
        if math.isfinite(value)
        else repr(value).replace("inf", "Infinity").replace("nan", "NaN")
    )
    return {"key": key, "value": shown, "timestamp": timestamp, "step": step}


def logged_model_object(
    model_id: str,
    experiment_id: str,
    name: str,
    created: int,
    updated: int,
    artifact_uri: str,
    status: str,
    source_run_id: str,
    model_type: str,
    params: dict[str, str],
    tags: dict[str, str],
) -> dict[str, Any]:
    """A logged model as MLflow's API returns it."""
    return {
        "info": {
            "model_id": model_id,
            "experiment_id": experiment_id,
            "name": name,
            "creation_timestamp_ms": created,
            "last_updated_timestamp_ms": updated,
            "artifact_uri": artifact_uri,
            "status": status,
            "source_run_id": source_run_id,
            "model_type": model_type,
            "tags": [{"key": k, "value": v} for k, v in tags.items()],
        },
        "data": {"params": [{"key": k, "value": v} for k, v in params.items()]},
    }


def experiment_object(
    experiment_id: str, name: str, artifact_location: str, tags: dict[str, str] | None = None
) -> dict[str, Any]:
    found: dict[str, Any] = {
        "experiment_id": experiment_id,
        "name": name,
        "artifact_location": artifact_location,
        "lifecycle_stage": "active",
    }
    if tags:
        found["tags"] = [{"key": k, "value": v} for k, v in tags.items()]
    return found
