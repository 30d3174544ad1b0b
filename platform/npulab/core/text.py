"""Text from a host, made storable on every database."""

from __future__ import annotations

import unicodedata


def storable(text: str, limit: int | None = None) -> str:
    """``text`` without what PostgreSQL refuses (NUL, lone surrogates), cut to ``limit``.

    A user's program chose these bytes: they must not fail the row they are in.
    """
    if limit is not None and len(text) > limit:
        text = text[:limit] + f" [... {len(text) - limit} chars cut]"
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def storable_json(value: object, depth: int = 20) -> object:
    """A JSON value with every string made ``storable`` (PostgreSQL's jsonb refuses \\u0000)."""
    if isinstance(value, str):
        return storable(value)
    if depth <= 0:
        return None
    if isinstance(value, dict):
        return {storable(str(key)): storable_json(item, depth - 1) for key, item in value.items()}
    if isinstance(value, list):
        return [storable_json(item, depth - 1) for item in value]
    return value


# Characters that reorder or hide what follows them: "report\u202eexe.pdf" shows as
# "reportfdp.exe". Control and format characters besides.
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def served_filename(name: str, fallback: str = "download") -> str:
    """``name`` as a download may carry it: no bidi controls, no control or format
    characters, no folders; ``fallback`` when nothing is left."""
    kept = "".join(
        char
        for char in name.replace("/", "_").replace("\\", "_")
        if char not in _BIDI and unicodedata.category(char) not in ("Cc", "Cf")
    ).strip()
    return kept or fallback


def error_text(error: BaseException) -> str:
    """What went wrong, for a person: an OSError without the file name it carries (a path on
    the server is nobody's business on a page or in an API answer)."""
    if isinstance(error, OSError):
        return error.strerror or type(error).__name__
    return str(error)
