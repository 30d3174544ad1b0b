"""schemathesis against the committed docs/openapi.yaml: no 5xx, no answer it does not describe.

Every operation, with all of schemathesis' checks (server errors, status codes,
content types, headers and bodies against the schema, schema-valid requests
accepted and schema-invalid ones refused, auth), in-process on the Django app
and inside each test's transaction, so nothing is left behind. The examples
are bounded and derandomized: the same requests every run, a few seconds an
operation on a quiet machine.

Not under pytest-xdist: there each test below ran as a single item, in seconds, instead of an
item per operation (schemathesis 4.32.5). ``make test`` runs this file in a process of its own
beside the rest.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import schemathesis
from django.core import signals
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from npulab.accounts.models import Scope
from npulab.accounts.services import do_issue_api_token
from npulab.hosts.models import Host
from npulab.hosts.services import do_issue_host_token
from tests.factories import UserFactory
from tests.paths import REPO_DIR

if os.environ.get("PYTEST_XDIST_WORKER"):
    pytest.skip(
        "schemathesis runs in a process of its own (make test runs it beside the rest)",
        allow_module_level=True,
    )

SCHEMA = schemathesis.openapi.from_path(REPO_DIR / "docs" / "openapi.yaml")
SCHEMA.app = WSGIHandler()
AGENT = r"^/api/v1/agent/"

# Requests the schema cannot tell from good ones, refused with 400 naming the
# field because of what is stored, not of their shape: a run no registered host
# could ever take (docs/api.md, "Runs no host could take"), query parameters
# naming another object that does not exist; rules across items or fields that
# JSON Schema cannot state (a host's devices numbered 0..n-1, an events batch's
# `end` past its `start` by its number of events); and a snapshot, whose own
# versioned format the snapshot contract checks (docs/snapshots.md).
REFUSED_BEYOND_SCHEMA = {
    "POST /api/v1/agent/register/",
    "POST /api/v1/agent/runs/{run_id}/events/",
    "POST /api/v1/agent/snapshots/",
    "POST /api/v1/runs/",
    "GET /api/v1/runs/compare/",
    "GET /api/v1/runs/{run_id}/coverage/compare/",
    "GET /api/v1/snapshots/diff/",
    "GET /api/v1/hosts/{name}/upgrade-review/",
}

FUZZ = settings(
    max_examples=10,
    derandomize=True,
    deadline=None,
    database=None,
    # The fixtures are the test's own (a token, a host); the app's answers vary in size.
    suppress_health_check=list(HealthCheck),
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _connection_kept() -> Iterator[None]:
    """The app runs inside the test's transaction: no request may close the connection.

    Django's test client does the same; a bare WSGI handler closes it after each request.
    """
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def user_token(cpu_host: Host) -> str:
    """A staff user's token with every scope, on a platform with one online CPU host."""
    user = UserFactory(username="fuzz", is_staff=True)
    return do_issue_api_token(user, scopes=Scope.values)[1]


@pytest.fixture
def host_token(cpu_host: Host) -> str:
    return do_issue_host_token(cpu_host)


def checks_skipped(case: schemathesis.Case) -> list:
    label = f"{case.operation.method.upper()} {case.operation.path}"
    return [positive_data_acceptance] if label in REFUSED_BEYOND_SCHEMA else []


@SCHEMA.exclude(path_regex=AGENT).parametrize()
@FUZZ
def test_user_operations(case: schemathesis.Case, user_token: str) -> None:
    case.call_and_validate(
        headers={"Authorization": f"Token {user_token}"}, excluded_checks=checks_skipped(case)
    )


@SCHEMA.include(path_regex=AGENT).parametrize()
@FUZZ
def test_agent_operations(case: schemathesis.Case, host_token: str) -> None:
    case.call_and_validate(
        headers={"Authorization": f"Token {host_token}"}, excluded_checks=checks_skipped(case)
    )
