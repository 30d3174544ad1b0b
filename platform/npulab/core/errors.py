"""The errors services raise that every API answers the same way (see ``core.api``).

They live here, below the apps that raise them, so the exception handler
needs no app. So do the machine-readable ``code`` values every error body
carries (docs/api.md, "Errors", lists them): clients branch on the code, and
show the ``detail`` to people.
"""

from __future__ import annotations

from typing import Any

# Every ``code`` an error body of the API may carry, with what it means. DRF's
# own exceptions bring theirs (``default_code``); the names match them.
INVALID = "invalid"
PARSE_ERROR = "parse_error"
NOT_AUTHENTICATED = "not_authenticated"
AUTHENTICATION_FAILED = "authentication_failed"
TOKEN_EXPIRED = "token_expired"  # noqa: S105 - an error code, not a secret
TOKEN_REVOKED = "token_revoked"  # noqa: S105 - an error code, not a secret
PERMISSION_DENIED = "permission_denied"
INSUFFICIENT_SCOPE = "insufficient_scope"
NOT_FOUND = "not_found"
METHOD_NOT_ALLOWED = "method_not_allowed"
NOT_ACCEPTABLE = "not_acceptable"
UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
CONFLICT = "conflict"
IDEMPOTENCY_CONFLICT = "idempotency_conflict"
OFFSET_MISMATCH = "offset_mismatch"
UPLOAD_FINISHED = "upload_finished"
CHECKPOINT_DAMAGED = "checkpoint_damaged"
HANDOFF_DAMAGED = "handoff_damaged"
PAYLOAD_TOO_LARGE = "payload_too_large"
UNPROCESSABLE = "unprocessable"
THROTTLED = "throttled"
SERVER_ERROR = "server_error"
STORE_FULL = "store_full"

ERROR_CODES: dict[str, tuple[int, str]] = {
    INVALID: (400, "a field, parameter or header is wrong; the body names each one"),
    PARSE_ERROR: (400, "the body is not valid JSON"),
    NOT_AUTHENTICATED: (401, "no token and no session"),
    AUTHENTICATION_FAILED: (401, "the token is unknown, malformed or its user is inactive"),
    TOKEN_EXPIRED: (401, "the token is past its expiry"),
    TOKEN_REVOKED: (401, "the token was revoked"),
    PERMISSION_DENIED: (403, "this caller may not do this (another user's run, a host token)"),
    INSUFFICIENT_SCOPE: (403, "the token lacks the scope the request needs (named in detail)"),
    NOT_FOUND: (404, "no such object or URL"),
    METHOD_NOT_ALLOWED: (405, "the URL does not take this method"),
    NOT_ACCEPTABLE: (406, "no answer in the media type asked for in Accept"),
    CONFLICT: (409, "the request does not fit the object's state (e.g. cancel an ended run)"),
    IDEMPOTENCY_CONFLICT: (409, "the Idempotency-Key was used before with another body"),
    OFFSET_MISMATCH: (409, "an upload chunk does not start where the upload is"),
    CHECKPOINT_DAMAGED: (
        409,
        "the stored checkpoint no longer matches its SHA-256; it is marked damaged",
    ),
    HANDOFF_DAMAGED: (
        409,
        "a stored file one host of a run handed to another no longer matches its SHA-256",
    ),
    UPLOAD_FINISHED: (409, "the upload is already stored or damaged"),
    PAYLOAD_TOO_LARGE: (413, "the body or the declared file is over the size limit"),
    UNSUPPORTED_MEDIA_TYPE: (415, "the body's Content-Type is not one the URL takes"),
    UNPROCESSABLE: (422, "an upload does not match its declared size or SHA-256"),
    THROTTLED: (429, "over the token's request rate; retry after Retry-After seconds"),
    SERVER_ERROR: (500, "the platform failed; worth a retry"),
    STORE_FULL: (507, "the artifact store has no room; the upload keeps its offset, retry later"),
}


class SubmissionInvalid(Exception):
    """A submission was refused; ``errors`` maps each field to why."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{key}: {msg}" for key, msg in errors.items()))


class Conflict(Exception):
    """A request that does not fit the run's current state (HTTP 409).

    ``code`` is one of the conflict codes above; ``extra`` joins the body.
    """

    def __init__(self, detail: str, code: str = CONFLICT, **extra: Any) -> None:
        self.detail = detail
        self.code = code
        self.extra = extra
        super().__init__(detail)


class InvalidTransition(Exception):
    """A run was asked to move to a status its current status cannot reach."""
