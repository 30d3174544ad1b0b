"""The API's list pages: ``limit`` and ``offset`` checked, not ignored when wrong."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

from npulab.core.converters import MAX_ID

# More rows than this a page never holds (a larger limit gets this many).
MAX_LIMIT = 10_000


class CheckedLimitOffsetPagination(LimitOffsetPagination):
    """``DEFAULT_PAGINATION_CLASS``: a ``limit`` or ``offset`` that is not a count is a 400.

    DRF's own serves the first page for ``offset=x`` or ``limit=-1`` and
    passes any offset to the database, where SQLite overflows past 64 bits.
    """

    max_limit = MAX_LIMIT

    def get_limit(self, request: Request) -> int | None:
        raw = request.query_params.get(self.limit_query_param)
        if raw is None:
            return self.default_limit
        return min(_count(self.limit_query_param, raw, minimum=1), MAX_LIMIT)

    def get_offset(self, request: Request) -> int:
        raw = request.query_params.get(self.offset_query_param)
        return 0 if raw is None else _count(self.offset_query_param, raw, minimum=0)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        bounds = {
            self.limit_query_param: {"minimum": 1, "maximum": MAX_ID},
            self.offset_query_param: {"minimum": 0, "maximum": MAX_ID},
        }
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
        limit = next(p for p in parameters if p["name"] == self.limit_query_param)
        limit["description"] += f" At most {MAX_LIMIT:,}."
        return parameters


def _count(name: str, raw: str, minimum: int) -> int:
    if not (raw.isascii() and raw.isdigit()) or not minimum <= int(raw) <= MAX_ID:
        raise ValidationError({name: [f"must be an integer from {minimum} to {MAX_ID}"]})
    return int(raw)
