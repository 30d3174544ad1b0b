"""Tokens issued before scopes existed go on working for what pipelines did with them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = ("accounts", "0001_initial")
AFTER = ("accounts", "0002_token_scopes_expiry_revocation")


@pytest.fixture
def restored() -> Iterator[None]:
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_earlier_tokens_get_read_and_submit_and_never_expire(restored) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    old = executor.loader.project_state([BEFORE]).apps
    user = old.get_model("auth", "User").objects.create(username="before-scopes")
    old.get_model("accounts", "ApiToken").objects.create(
        user_id=user.pk, name="ci", display="npl_abcdef", digest="0" * 64
    )

    executor = MigrationExecutor(connection)
    executor.migrate([AFTER])
    new = executor.loader.project_state([AFTER]).apps
    token = new.get_model("accounts", "ApiToken").objects.get(digest="0" * 64)
    assert (token.scopes, token.expires, token.revoked) == (["read", "submit"], None, None)
