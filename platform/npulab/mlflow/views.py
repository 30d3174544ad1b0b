"""``/mlflow/``: MLflow's REST tracking API for outside clients, with an npulab API token.

A notebook or a CI job sets ``MLFLOW_TRACKING_URI=https://npulab.example/mlflow`` and
``MLFLOW_TRACKING_TOKEN`` to a user token; MLflow's client sends it as a bearer token.
The routes, limits and errors are the contract's (workers.contract.mlflow), the same the
supervisor serves a run's script; the store is the database (npulab.mlflow.store).
Artifacts go through MLflow's proxied artifact API under the same prefix, their bodies
streamed both ways.
"""

from __future__ import annotations

import json

from django.http import FileResponse, HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import APIException
from rest_framework.request import Request

from npulab.accounts.authentication import TokenAuthentication
from npulab.accounts.models import Scope
from npulab.mlflow.store import DatabaseStore
from workers.contract.mlflow import (
    MAX_BODY_BYTES,
    ArtifactFile,
    handle,
    handle_artifacts,
    is_artifact_request,
)

UNAUTHENTICATED = "UNAUTHENTICATED"
PERMISSION_DENIED = "PERMISSION_DENIED"


@csrf_exempt
def tracking_api(request: HttpRequest, path: str) -> HttpResponse:
    try:
        found = TokenAuthentication().authenticate(Request(request))
    except APIException as exc:
        return _reply(exc.status_code, {"error_code": UNAUTHENTICATED, "message": str(exc.detail)})
    if found is None:
        message = "An npulab API token is required: set MLFLOW_TRACKING_TOKEN to one."
        return _reply(401, {"error_code": UNAUTHENTICATED, "message": message})
    user, token = found
    # Every call of MLflow's client that logs is a POST: it needs the token's submit scope,
    # a read its read scope, as in the rest of the API.
    scope = Scope.READ if request.method == "GET" else Scope.SUBMIT
    if not token.has_scope(scope):
        message = f"This token lacks the `{scope}` scope, which {request.method} needs."
        return _reply(403, {"error_code": PERMISSION_DENIED, "message": message})
    method, path, query = request.method or "GET", "/" + path, request.GET.dict()
    raw_length = request.headers.get("Content-Length") or ""
    length = int(raw_length) if raw_length.isdigit() else None
    if is_artifact_request(path):
        # The request itself is the body's stream: an artifact is read in blocks.
        status, answer = handle_artifacts(
            DatabaseStore(user),
            method,
            path,
            query,
            request,
            length,  # type: ignore[arg-type]
        )
        if isinstance(answer, ArtifactFile):
            response = FileResponse(answer.stream, content_type="application/octet-stream")
            response["Content-Length"] = str(answer.size)
            return response
        return _reply(status, answer)
    body = b"" if (length or 0) > MAX_BODY_BYTES else request.body
    status, reply = handle(DatabaseStore(user), method, path, query, body)
    return _reply(status, reply)


def _reply(status: int, body: dict) -> HttpResponse:
    return HttpResponse(json.dumps(body), status=status, content_type="application/json")
