"""How durable a transaction's commit must be before it returns."""

from __future__ import annotations

from django.db import connection


def commit_without_flush() -> None:
    """Let the current transaction's commit return before its WAL is flushed to disk.

    For writes the platform repairs by itself when a database crash loses the last
    of them (consistently: the whole transaction or nothing). On PostgreSQL a flush
    is the most expensive part of a small commit (milliseconds on a virtual disk);
    SQLite, in WAL mode with ``synchronous=NORMAL`` (``npulab.conf``), already
    commits every transaction this way. Call it inside ``transaction.atomic``.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
