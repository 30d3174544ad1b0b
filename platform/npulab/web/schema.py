"""How the API schema is made: each error an operation can answer; agent endpoints last."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.plumbing import ResolvedComponent, alpha_operation_sorter
from rest_framework import serializers

from npulab.agent.permissions import IsHostAgent
from npulab.core import errors
from npulab.core.api import ErrorSerializer

# Every endpoint a host worker calls with its host token (npulab.agent).
AGENT_PREFIX = "/api/v1/agent/"
JSON = "application/json"
FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


def agent_endpoints_last(endpoint: tuple[str, str, str, Any]) -> tuple[bool, Any]:
    """``SORT_OPERATIONS``: by path and method, the agent's endpoints after all the others.

    Swagger UI lists tags in the order their first operation comes, so this
    alone puts the agent section last; ReDoc follows ``TAGS``.
    """
    return endpoint[0].startswith(AGENT_PREFIX), alpha_operation_sorter(endpoint)


# The shared error answers (components/responses), by status.
ERROR_RESPONSES = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    413: "PayloadTooLarge",
    415: "UnsupportedMediaType",
    429: "TooManyRequests",
}


def error_description(status: int) -> str:
    """The ``code`` values an answer with ``status`` may carry, with what each means."""
    return "; ".join(
        f"`{code}`: {meaning}"
        for code, (code_status, meaning) in errors.ERROR_CODES.items()
        if code_status == status
    )


class AutoSchema(SpectacularAutoSchema):
    """``DEFAULT_SCHEMA_CLASS``: each operation documents every error it can answer.

    Which follows from the operation's shape, so it is derived here once, not
    declared on every view: a token can be missing or wrong (401) or lack the
    right (403) anywhere; an id in the path can name nothing (404); a body can
    be wrong (400), too large (413) or of another media type (415); query
    parameters can be wrong (400); a user's token can run out of requests
    (429). A view declares what its objects' state can refuse (409, with
    ``ErrorSerializer``) and its own answers; a declared error answer with no
    description of its own becomes the shared one.
    """

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        responses = operation["responses"]
        for status in self._error_statuses(operation):
            responses.setdefault(str(status), {})
        for code, response in responses.items():
            if int(code) in ERROR_RESPONSES and not response.get("description"):
                responses[code] = self._error_response(int(code))
        operation["responses"] = dict(sorted(responses.items()))
        return operation

    def _map_serializer_field(self, field: Any, direction: str, *args: Any) -> dict[str, Any]:
        schema = super()._map_serializer_field(field, direction, *args)
        # A list that may not be empty says so (drf-spectacular leaves allow_empty out).
        many = (serializers.ListField, serializers.MultipleChoiceField)
        if isinstance(field, many) and not field.allow_empty and schema.get("type") == "array":
            schema.setdefault("minItems", 1)
        return schema

    def map_parsers(self) -> list[Any]:
        """A view that takes JSON is documented with JSON bodies only.

        DRF's form parsers (kept for the browsable API) cannot carry what the
        JSON bodies hold (nested objects, lists, null), so a body valid in the
        schema would be refused as a form.
        """
        media_types = super().map_parsers()
        if JSON not in media_types:
            return media_types
        return [media_type for media_type in media_types if media_type not in FORMS]

    def _error_statuses(self, operation: dict[str, Any]) -> list[int]:
        statuses = [401, 403]
        places = {parameter["in"] for parameter in operation.get("parameters", [])}
        if "requestBody" in operation or places - {"path"}:
            statuses.append(400)
        if "path" in places:
            statuses.append(404)
        if "requestBody" in operation:
            statuses += [413, 415]
        if self._throttled():
            statuses.append(429)
        return statuses

    def _throttled(self) -> bool:
        """Only a user is rate-limited: host tokens, the agent endpoints' only callers, are not."""
        host_only = any(isinstance(p, IsHostAgent) for p in self.view.get_permissions())
        return bool(self.view.get_throttles()) and not host_only

    def _error_response(self, status: int) -> dict[str, Any]:
        """A reference to the shared answer for ``status``, registered on first use."""
        response = self._get_response_for_code(ErrorSerializer, str(status), media_types=[JSON])
        response["description"] = error_description(status)
        component = ResolvedComponent(
            name=ERROR_RESPONSES[status],
            type=ResolvedComponent.RESPONSE,
            schema=response,
            object=ERROR_RESPONSES[status],
        )
        self.registry.register_on_missing(component)
        return component.ref


# No text the API takes may hold NUL: PostgreSQL cannot store it, so every
# serializer refuses it (DRF's CharField, the spec validators) on every database.
NO_NUL = "^[^\\u0000]*$"


def text_without_nul(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """``POSTPROCESSING_HOOKS``: request strings say they refuse NUL, as the API does.

    Every string of a request body, and every query or header parameter's,
    that has no format, enum or pattern of its own gets ``NO_NUL``.
    """
    schemas = result.get("components", {}).get("schemas", {})
    for name, schema in schemas.items():
        if name.endswith("Request"):
            _forbid_nul(schema)
    for item in result.get("paths", {}).values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] != "path":
                    _forbid_nul(parameter.get("schema", {}))
            for media in operation.get("requestBody", {}).get("content", {}).values():
                _forbid_nul(media.get("schema", {}))
    return result


def _forbid_nul(schema: Any) -> None:
    if isinstance(schema, list):
        for item in schema:
            _forbid_nul(item)
        return
    if not isinstance(schema, dict) or "$ref" in schema:
        return  # components are walked once, by name
    own = {"format", "enum", "pattern", "readOnly"}
    if schema.get("type") == "string" and not schema.keys() & own:
        schema["pattern"] = NO_NUL
    for key in ("properties", "patternProperties"):
        for value in (schema.get(key) or {}).values():
            _forbid_nul(value)
    for key in ("items", "additionalProperties", "not"):
        _forbid_nul(schema.get(key))
    for key in ("oneOf", "anyOf", "allOf"):
        _forbid_nul(schema.get(key))
