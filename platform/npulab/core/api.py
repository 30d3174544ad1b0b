"""What every API view shares: the error format (a `code` and a `detail`), fast JSON."""

from __future__ import annotations

from typing import IO, Any

import orjson
from django.core.exceptions import ObjectDoesNotExist, RequestDataTooBig
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseServerError, JsonResponse
from django.template import loader
from django.views import defaults
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, ParseError, ValidationError
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder
from rest_framework.views import exception_handler as drf_exception_handler

from npulab.core import errors
from npulab.core.errors import Conflict, InvalidTransition, SubmissionInvalid

API_PREFIX = "/api/"
# What every file download is served as (a guess from the name can be anything).
OCTET_STREAM = "application/octet-stream"


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus the services' own errors: 400 by field, 404, 409 for conflicts.

    Every body it answers has a machine-readable ``code`` (``core.errors``) and
    a ``detail`` for people; a 400 keeps each bad field's messages beside them.
    """
    response = _response(exc, context)
    if response is not None and isinstance(response.data, (dict, list)):
        response.data = error_body(response.data, _code(exc))
    return response


def _response(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, SubmissionInvalid):
        body = {field: [message] for field, message in exc.errors.items()}
        return Response(body, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, Conflict):
        return Response({"detail": exc.detail, **exc.extra}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, InvalidTransition):
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, ObjectDoesNotExist):
        return Response({"detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, RequestDataTooBig):
        # Django would answer 400 in HTML; the limit is NPULAB_MAX_REQUEST_BYTES.
        detail = f"{exc} (NPULAB_MAX_REQUEST_BYTES)"
        return Response({"detail": detail}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    return drf_exception_handler(exc, context)


def _code(exc: Exception) -> str:
    if isinstance(exc, SubmissionInvalid | ValidationError):
        return errors.INVALID
    if isinstance(exc, Conflict):
        return exc.code
    if isinstance(exc, InvalidTransition):
        return errors.CONFLICT
    if isinstance(exc, ObjectDoesNotExist | Http404):
        return errors.NOT_FOUND
    if isinstance(exc, RequestDataTooBig):
        return errors.PAYLOAD_TOO_LARGE
    if isinstance(exc, DjangoPermissionDenied):
        return errors.PERMISSION_DENIED
    if isinstance(exc, APIException):
        # A message raised with its own code (a token's expiry) keeps it.
        return getattr(exc.detail, "code", None) or str(exc.default_code)
    return errors.SERVER_ERROR


def error_body(data: dict[str, Any] | list[Any], code: str) -> dict[str, Any]:
    """``data`` as an error body: ``code``, ``detail``, and any fields' messages beside them."""
    if isinstance(data, list):
        # ValidationError("...") with no field: its messages are the detail.
        return {"code": code, "detail": " ".join(_messages(data)) or code}
    body = dict(data)
    detail = body.pop("detail", None)
    body.pop("code", None)
    if detail is None:
        detail = "; ".join(
            f"{field}: {' '.join(_messages(messages))}"
            if field != "non_field_errors"
            # "non_field_errors" is DRF's name for what belongs to no field.
            else " ".join(_messages(messages))
            for field, messages in body.items()
        )
    elif isinstance(detail, list | dict):
        detail = " ".join(_messages(detail))
    return {"code": code, "detail": str(detail), **body}


def _messages(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [message for item in value.values() for message in _messages(item)]
    if isinstance(value, list):
        return [message for item in value for message in _messages(item)]
    return [str(value)]


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler400``: what Django refuses before a view runs, as an error body under /api/.

    A form body of more than DATA_UPLOAD_MAX_NUMBER_FIELDS fields, say, or a
    Host it does not serve. The detail is fixed: Django's message names settings.
    """
    if request.path.startswith(API_PREFIX):
        detail = "The request is malformed: its Host, or its body's form fields or files."
        body = {"code": errors.INVALID, "detail": detail}
        return JsonResponse(body, status=status.HTTP_400_BAD_REQUEST)
    return defaults.bad_request(request, exception)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler404``: a URL under /api/ that names no endpoint gets an error body too."""
    if request.path.startswith(API_PREFIX):
        body = {"code": errors.NOT_FOUND, "detail": f"No API endpoint at {request.path}."}
        return JsonResponse(body, status=status.HTTP_404_NOT_FOUND)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: after Django has logged the failure, API clients get an error body.

    A person gets the 500 page with the site's navigation, rendered with the
    request's context, or with none when building that context is what fails
    (the database is gone: the session's user cannot be read).
    """
    if request.path.startswith(API_PREFIX):
        body = {"code": errors.SERVER_ERROR, "detail": "The platform failed; try again later."}
        return JsonResponse(body, status=status.HTTP_500_INTERNAL_SERVER_ERROR)
    page = loader.get_template(defaults.ERROR_500_TEMPLATE_NAME)
    try:
        body = page.render({}, request)
    except Exception:  # whatever failed, the page must still answer
        body = page.render({})
    return HttpResponseServerError(body)


class ErrorSerializer(serializers.Serializer):
    """The body of every error answer (for the schema); a 400 adds each bad field's messages."""

    code = serializers.CharField(
        help_text="What went wrong, for programs: one of the codes in docs/api.md (Errors)."
    )
    detail = serializers.CharField(help_text="What went wrong, for people.")


_DRF_ENCODER = JSONEncoder()


class FastJSONParser(JSONParser):
    """JSON bodies through orjson: an events batch of 10,000 parses in a quarter of the time."""

    def parse(
        self, stream: IO[bytes], media_type: str | None = None, parser_context: Any = None
    ) -> Any:
        try:
            return orjson.loads(stream.read())
        except orjson.JSONDecodeError as error:
            raise ParseError(f"JSON parse error - {error}") from error


class FastJSONRenderer(JSONRenderer):
    """Responses through orjson, for endpoints that return long lists of numbers."""

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        if data is None:
            return b""
        # DRF's encoder covers what orjson does not (lazy translations, Decimal).
        return orjson.dumps(data, default=_DRF_ENCODER.default)
