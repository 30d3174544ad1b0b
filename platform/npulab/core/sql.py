"""Plain SQL for the statements every agent request makes, with the ORM's conversions.

An events batch reads the host by its token and the run under a lock, then updates the
run: through querysets and ``Model.save`` those three cost more of the web's CPU than the
database spent on them (docs/benchmarks.md, "Ingestion per request"). The helpers here
build the same instances and write the same column values as the ORM would, from one
plain statement each. Elsewhere the ORM is the way; these are for hot paths only.
``table_name`` is how every plain statement names its table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any, TypeVar

import psycopg
from django.db import connection
from django.db.models import Model

M = TypeVar("M", bound=Model)

# (attribute names, SQL column list, per column its expression and its converters)
_Reader = tuple[list[str], str, list[tuple[Any, list[Callable[..., Any]]]]]


def table_name(model: type[Model]) -> str:
    """The model's table, quoted for the database in use."""
    return connection.ops.quote_name(model._meta.db_table)


def column_name(model: type[Model], field: str) -> str:
    """The column of the model's ``field`` ("pk": its primary key), quoted likewise."""
    meta = model._meta
    return connection.ops.quote_name((meta.pk if field == "pk" else meta.get_field(field)).column)


def fetch_instance(model: type[M], template: str, params: Sequence[Any]) -> M | None:
    """The first row of ``template`` as an instance of ``model``, or None.

    ``template`` names the selected columns ``{columns}`` and the table ``{table}``
    (``"SELECT {columns} FROM {table} WHERE id = %s FOR UPDATE"``). Every concrete field
    is loaded and converted as a queryset would (JSON decoded, datetimes made aware), so
    the instance is one the ORM could have returned: it saves, refreshes and compares
    alike. A raw queryset gives the same, at twice the cost for one row.
    """
    names, columns, converters = _reader(model, connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute(template.format(columns=columns, table=table_name(model)), params)
        row = cursor.fetchone()
    if row is None:
        return None
    values = list(row)
    for index, (column, chain) in enumerate(converters):
        for convert in chain:
            values[index] = convert(values[index], column, connection)
    return model.from_db(connection.alias, names, values)


@cache
def _reader(model: type[Model], vendor: str) -> _Reader:
    """What ``fetch_instance`` needs to know of a model, once per model and database.

    The converters are the compiler's for a plain column: the backend's, then the
    field's own ``from_db_value``, each given the column as its expression.
    """
    fields = model._meta.concrete_fields
    quote = connection.ops.quote_name
    converters = []
    for field in fields:
        column = field.get_col(model._meta.db_table)
        chain = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        converters.append((column, chain))
    names = [field.attname for field in fields]
    return names, ", ".join(quote(field.column) for field in fields), converters


def update_fields(instance: Model, names: Sequence[str]) -> None:
    """``instance.save(update_fields=names)`` as one plain UPDATE of its row.

    ``auto_now`` fields among ``names`` are stamped as ``save`` would; each value goes
    through its field's ``get_db_prep_save`` (JSON encoded, datetimes for the database).
    No signal is sent: use it only for models none listens to.
    """
    meta = instance._meta
    fields = [meta.get_field(name) for name in names]
    values = [
        field.get_db_prep_save(field.pre_save(instance, add=False), connection) for field in fields
    ]
    assignments = ", ".join(f"{connection.ops.quote_name(field.column)} = %s" for field in fields)
    where = connection.ops.quote_name(meta.pk.column)
    sql = f"UPDATE {table_name(type(instance))} SET {assignments} WHERE {where} = %s"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, [*values, instance.pk])


@contextmanager
def server_cursor() -> Iterator[psycopg.Cursor]:
    """psycopg's own cursor on Django's PostgreSQL connection, so in its transaction.

    Django's cursor binds parameters on the client, into the SQL text: a bytea goes as
    hex at twice its size, an array as a literal the server parses again. This one sends
    them beside the statement, in binary where psycopg can, and reads results in binary
    when ``execute`` is given ``binary=True``. Its errors are Django's, as its own
    cursor's are: an outage is logged as one (``npulab.core.logs``) and the connection
    is dropped at the end of the request.
    """
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        yield cursor


def fetch_rows(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """The rows of ``sql``; on PostgreSQL in the binary protocol, where a bytea is its bytes
    (as text it is hex, twice as long and decoded byte by byte)."""
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()
    with server_cursor() as cursor:
        cursor.execute(sql, params, binary=True)
        return cursor.fetchall()
