"""URL path converters (``<id:…>``, ``<step:…>``, ``<name:…>``), and a DRF router using them."""

from __future__ import annotations

from typing import Any

from django.urls import register_converter
from rest_framework.routers import DefaultRouter

# The largest value of a signed 64-bit column: PostgreSQL's bigint, SQLite's INTEGER.
MAX_ID = 2**63 - 1


class IdConverter:
    """A database id, 1..2**63-1; a bigger number names no row, so the URL answers 404.

    ``<int:…>`` passes 10**30 to the database, which SQLite answers with
    OverflowError (a 500) where PostgreSQL finds no row.
    """

    regex = "[0-9]{1,30}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if not 1 <= number <= MAX_ID:
            # Django takes ValueError for "this pattern does not match": a 404.
            raise ValueError(f"{value} is not a database id")
        return number

    def to_url(self, value: int) -> str:
        return str(value)


class StepConverter(IdConverter):
    """A training step, 0..2**63-1: a checkpoint may be of step 0."""

    def to_python(self, value: str) -> int:
        number = int(value)
        if not 0 <= number <= MAX_ID:
            raise ValueError(f"{value} is not a step")
        return number


class NameConverter:
    """A name in a URL (a host's, a kind's): any text but ``/`` and NUL, which no name holds.

    PostgreSQL refuses NUL in a query; a URL with one names nothing (404).
    """

    regex = "[^/\x00]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(IdConverter, "id")
register_converter(StepConverter, "step")
register_converter(NameConverter, "name")


class IdRouter(DefaultRouter):
    """DRF's router on ``path()`` patterns: ``<id:pk>`` for viewsets looked up by pk.

    Other lookups (a host's or a kind's name) take a ``<name:…>``; their
    views answer 404 for a name that is not there.
    """

    def __init__(self) -> None:
        super().__init__(use_regex_path=False)

    def get_lookup_regex(self, viewset: Any, lookup_prefix: str = "") -> str:
        field = getattr(viewset, "lookup_field", "pk")
        kwarg = getattr(viewset, "lookup_url_kwarg", None) or field
        converter = "id" if field == "pk" else "name"
        return f"<{converter}:{lookup_prefix}{kwarg}>"
