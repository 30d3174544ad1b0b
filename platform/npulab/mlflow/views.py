"""``/mlflow/``: MLflow's REST tracking API for outside clients, with an npulab API token.

A notebook or a CI job sets ``MLFLOW_TRACKING_URI=https://npulab.example/mlflow`` and
``MLFLOW_TRACKING_TOKEN`` to a user token; MLflow's client sends it as a bearer token.
The routes, limits and errors are the contract's (workers.contract.mlflow), the same the
supervisor serves a run's script; the store is the database (npulab.mlflow.store).
"""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import APIException
from rest_framework.request import Request

from npulab.accounts.authentication import TokenAuthentication
from npulab.accounts.models import Scope
from npulab.mlflow.store import DatabaseStore
from workers.contract.mlflow import MAX_BODY_BYTES, handle

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
    length = int(request.headers.get("Content-Length") or 0)
    body = b"" if length > MAX_BODY_BYTES else request.body
    status, reply = handle(
        DatabaseStore(user), request.method or "GET", "/" + path, request.GET.dict(), body
    )
    return _reply(status, reply)


def _reply(status: int, body: dict) -> HttpResponse:
    return HttpResponse(json.dumps(body), status=status, content_type="application/json")
