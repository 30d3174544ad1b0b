"""``/api/v1/kinds/``: the registered run kinds and their spec fields.

The submit form, the API docs and the ``npulab`` CLI are built from the same
declarations, so none of them keeps a list of fields by hand.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, viewsets
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from workers.contract import kinds


@extend_schema_field({"type": "number", "nullable": True})
class BoundField(serializers.JSONField):
    """A bound as declared: 1 stays 1, not 1.0."""


class KindFieldSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.ChoiceField(
        choices=["integer", "number", "string", "boolean", "env", "strings", "object", "ranks"],
        help_text="A JSON type; `env`: object of name to string; `strings`: list of strings; "
        "`object`: a JSON object, or null (the profiling window); `ranks`: global ranks of "
        'the run as a list of integers, or "all".',
    )
    required = serializers.BooleanField()
    default = serializers.JSONField(allow_null=True, help_text="Null for a required field.")
    minimum = BoundField(allow_null=True)
    maximum = BoundField(allow_null=True)
    choices = serializers.ListField(child=serializers.CharField(), allow_null=True)
    help = serializers.CharField(allow_blank=True)


class KindSerializer(serializers.Serializer):
    name = serializers.CharField()
    title = serializers.CharField()
    fields = KindFieldSerializer(many=True, help_text="The spec's keys, `kind` first.")
    causes = serializers.ListField(
        child=serializers.CharField(), help_text="Exit causes only this kind reports."
    )
    event_types = serializers.ListField(
        child=serializers.CharField(), help_text="Event types this kind adds to events.jsonl."
    )
    capabilities = serializers.ListField(
        child=serializers.CharField(),
        help_text="What it does beyond a plain run: checkpoints, profiling.",
    )


class KindViewSet(viewsets.ViewSet):
    """Run kinds: what each one's spec accepts."""

    lookup_field = "name"
    lookup_value_regex = r"[a-z][a-z0-9_]*"

    @extend_schema(responses={200: KindSerializer(many=True)})
    def list(self, request: Request) -> Response:
        """Every registered kind, in name order (not paged: there are a handful)."""
        return Response([_describe(kind) for kind in kinds.all_kinds()])

    @extend_schema(responses={200: KindSerializer})
    def retrieve(self, request: Request, name: str) -> Response:
        kind = kinds.get(name)
        if kind is None:
            raise NotFound(f"no run kind {name!r}; one of: {', '.join(kinds.names())}")
        return Response(_describe(kind))


def _describe(kind: kinds.Kind) -> dict[str, Any]:
    return KindSerializer(kind.describe()).data
