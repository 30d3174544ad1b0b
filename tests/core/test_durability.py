from __future__ import annotations

import pytest
from django.db import connection, transaction

from npulab.core.durability import commit_without_flush

pytestmark = pytest.mark.django_db(transaction=True)


def synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="SQLite (WAL, synchronous=NORMAL) never waits"
)
def test_only_the_transaction_that_asks_commits_without_waiting_for_the_disk() -> None:
    # The tests' sessions commit without waiting (PGOPTIONS, tests/settings.py): this one
    # waits, as the platform's do, so that the transaction's own setting shows.
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit = on")
    try:
        with transaction.atomic():
            commit_without_flush()
            assert synchronous_commit() == "off"
        assert synchronous_commit() == "on"
        with transaction.atomic():
            assert synchronous_commit() == "on"
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET synchronous_commit")
