"""Fixtures shared by every test: the fixed cast of users and hosts, API clients, messages."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from celery.signals import before_task_publish
from django.conf import settings
from django.contrib.auth.models import Group, Permission
from django.core.cache import cache
from rest_framework.test import APIClient

from harness import templates
from harness.ascend_tree import build_ascend_tree
from harness.commands import manage_each
from harness.stack import drop_postgres_database
from npulab.accounts.models import Scope
from npulab.accounts.roles import OPERATE_PERMISSION, OPERATORS_GROUP
from npulab.accounts.services import do_issue_api_token
from npulab.hosts.models import Host
from npulab.hosts.services import do_issue_host_token, do_register_host
from npulab.web.stack import child_env
from tests.e2e.shared import E2E_FILES, file_of, stop_after_the_last_e2e_test
from tests.factories import HostFactory, UserFactory
from tests.paths import ASCEND_FIXTURES
from workers.collect.snapshot import collect


def pytest_report_header(config: pytest.Config) -> list[str]:
    services = settings.SERVICES
    return [f"npulab database: {services.database_label}", f"npulab redis: {services.redis_label}"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files of end-to-end tests first, then the rest, each part's largest files first.

    The end-to-end files have few tests and take the longest: by pytest-xdist's own order
    (most tests first; `make test` turns it off) they came last, and a run could end on
    one worker's minutes-long file while the other core had nothing left. First, their
    waits on runs overlap the fuzzing and the other worker's tests.
    """
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(file_of(item), []).append(item)
    e2e = {name for name, tests in files.items() if any(t.get_closest_marker("e2e") for t in tests)}
    config.stash[E2E_FILES] = e2e
    ordered = sorted(files, key=lambda name: (name not in e2e, -len(files[name])))
    items[:] = [item for name in ordered for item in files[name]]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield
    stop_after_the_last_e2e_test(item, nextitem)


@pytest.fixture(scope="session")
def django_db_keepdb(request: pytest.FixtureRequest) -> bool:
    """On PostgreSQL pytest-django keeps the test database it finds: the copy made below."""
    return bool(settings.SERVICES.database_url) or request.config.getvalue("reuse_db")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    request: pytest.FixtureRequest, django_db_modify_db_settings_parallel_suffix: None
) -> Iterator[None]:
    """On PostgreSQL, the test database is a copy of a migrated template (harness.templates),
    made before pytest-django looks for it: each pytest process (every xdist worker, the
    fuzzing's) migrated a database of its own, 10 s of a loaded 2-core machine or more.
    pytest-django, told to keep it, does not drop it: that is done here, at the end."""
    server = settings.SERVICES.database_url
    if not server:
        yield
        return
    database = settings.DATABASES["default"]
    name = database.get("TEST", {}).get("NAME") or f"test_{database['NAME']}"
    url = urlsplit(server)._replace(path=f"/{name}").geturl()
    env = child_env({"DJANGO_SETTINGS_MODULE": "npulab.settings", "DATABASE_URL": url})
    templates.replace_with_migrated(env, lambda built: manage_each(built, ("migrate", "--noinput")))
    yield
    if not request.config.getvalue("reuse_db"):
        drop_postgres_database(url)


@pytest.fixture(scope="session", autouse=True)
def _flush_by_delete() -> Iterator[None]:
    """A transactional test's flush deletes the rows instead of truncating the tables.

    PostgreSQL's TRUNCATE makes new files for every table and index and drops the old ones:
    1.4-2.4 s for the 44 tables on a loaded 2-core machine, against 0.15-0.2 s for DELETEs
    of the few rows a test leaves, and about a hundred tests flush. The flush runs in one
    transaction and Django's foreign keys are deferred to its commit, by which every row is
    gone, so the order of the tables does not matter. A flush that must reset sequences or
    cascade still truncates.
    """
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(
        self: DatabaseOperations,
        style: Any,
        tables: list[str],
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        if reset_sequences or allow_cascade:
            return truncate(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        delete = style.SQL_KEYWORD("DELETE FROM")
        return [f"{delete} {style.SQL_FIELD(self.quote_name(table))};" for table in tables]

    DatabaseOperations.sql_flush = sql_flush
    yield
    DatabaseOperations.sql_flush = truncate


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    """Rate-limit and lockout counts are each test's own (the cache is per process)."""
    cache.clear()


@pytest.fixture
def owner(db: None) -> Any:
    return UserFactory(username="owner")


@pytest.fixture
def other_user(db: None) -> Any:
    return UserFactory(username="other")


@pytest.fixture
def staff(db: None) -> Any:
    return UserFactory(username="staff", is_staff=True)


def make_operator(user: Any) -> Any:
    """Give ``user`` the operator role (the operators group, ``npulab.accounts.roles``)."""
    group, made = Group.objects.get_or_create(name=OPERATORS_GROUP)
    if made:
        # The migration's group is gone after a transactional test's flush (which of those
        # ran before depends on how pytest-xdist shared the tests out): made again as it made it.
        app_label, codename = OPERATE_PERMISSION.split(".")
        group.permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    user.groups.add(group)
    return user


def token_client(user: Any, scopes: list[str] | None = None) -> APIClient:
    """A client with a new token of ``user``: every scope unless ``scopes`` says otherwise.

    Every scope, so the permission tests of the other apps are about who may, not
    which scope (tests/accounts covers the scopes).
    """
    client = APIClient()
    _, token = do_issue_api_token(user, scopes=Scope.values if scopes is None else scopes)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


@pytest.fixture
def api(owner: Any) -> APIClient:
    """The owner's token client."""
    return token_client(owner)


@pytest.fixture
def other_api(other_user: Any) -> APIClient:
    return token_client(other_user)


@pytest.fixture
def anon_api() -> APIClient:
    return APIClient()


def register(host: Host, device_type: str = "cpu", devices: int = 1, **facts: Any) -> Host:
    """Register ``host`` with these devices, as an operator had accepted them."""
    host.accepted_device_type, host.accepted_device_count = device_type, devices
    return do_register_host(
        host,
        {
            "device_type": device_type,
            "devices": [{"index": i, "name": f"{device_type}-{i}"} for i in range(devices)],
            **facts,
        },
    )


@pytest.fixture
def cpu_host(db: None) -> Host:
    """An online host with one CPU device."""
    return register(HostFactory(name="cpu-01"))


@pytest.fixture
def host_api(cpu_host: Host) -> APIClient:
    """The cpu-01 worker's client, with its host token."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {do_issue_host_token(cpu_host)}")
    return client


@pytest.fixture
def sent_tasks() -> Iterator[list[dict[str, Any]]]:
    """Celery messages published while the test runs: task name, args and queue."""
    sent: list[dict[str, Any]] = []

    def record(sender: str, headers: dict, body: Any, routing_key: str, **kwargs: Any) -> None:
        sent.append({"task": sender, "args": list(body[0]), "queue": routing_key})

    before_task_publish.connect(record, weak=False)
    yield sent
    before_task_publish.disconnect(record)


# -- snapshot documents made by the real collector from the real captures ----------

A2_8CARD = ASCEND_FIXTURES / "npu-smi-info/01_910B3_8card_npu-smi-25.2.0_procs_and_no-running.txt"


@pytest.fixture(scope="session")
def collected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("ascend")
    return collect(
        ascend_root=str(build_ascend_tree(root / "Ascend")),
        etc_dir=str(root),
        npu_smi_output=str(A2_8CARD),
        probe_torch_npu=False,
    )


@pytest.fixture
def document(collected: dict[str, Any]) -> Callable[..., dict[str, Any]]:
    """A fresh copy of the collected snapshot, changed as asked.

    ``packages`` replaces or removes (None) distributions, ``key`` the called-out
    versions, ``cann`` the toolkit version; ``hostname`` the host.
    """

    def make(
        packages: dict[str, str | None] | None = None,
        cann: str | None = None,
        hostname: str | None = None,
        **key: str,
    ) -> dict[str, Any]:
        doc = copy.deepcopy(collected)
        python = doc["python"]
        for name, version in (packages or {}).items():
            if version is None:
                python["packages"].pop(name, None)
            else:
                python["packages"][name] = version
        for name, version in key.items():
            python["key"][name.replace("_", "-")] = version
            python["packages"][name.replace("_", "-")] = version
        if cann:
            install = doc["ascend"]["cann"]["installs"][0]
            install["version"] = cann
            doc["ascend"]["cann"]["links"][0]["target"] = cann
        if hostname:
            doc["host"]["hostname"] = hostname
        return doc

    return make
