"""Is a new OpenAPI schema a compatible successor of a released one?

A client written against the released schema must keep working: every path
and operation it calls is still there, a request it could send is still
accepted (no new required field or parameter, no narrower type or enum),
and every field it reads in a reply is still sent with the same type and
never turns null. Additions (paths, operations, optional fields, reply
fields, enum values in replies) are compatible.

``breaking_changes`` lists what breaks, one sentence each; ``manage.py
api_compat`` runs it in ``make lint`` against the last release's schema in
docs/api-releases/.
"""

from __future__ import annotations

from typing import Any

METHODS = ("get", "put", "post", "patch", "delete", "head", "options")
# Schemas nested deeper than this are not followed (a recursive component).
MAX_DEPTH = 20


def breaking_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Every change from ``old`` to ``new`` that a client of ``old`` would notice."""
    found: list[str] = []
    new_paths = new.get("paths") or {}
    for path, old_item in (old.get("paths") or {}).items():
        new_item = new_paths.get(path)
        if new_item is None:
            found.append(f"{path}: removed")
            continue
        for method in METHODS:
            if method not in old_item:
                continue
            where = f"{method.upper()} {path}"
            if method not in new_item:
                found.append(f"{where}: removed")
                continue
            found += _operation(where, old, new, old_item[method], new_item[method])
    return found


def _operation(
    where: str, old: dict[str, Any], new: dict[str, Any], before: dict, after: dict
) -> list[str]:
    found = []
    old_params = {(p.get("in"), p.get("name")): p for p in _params(old, before)}
    new_params = {(p.get("in"), p.get("name")): p for p in _params(new, after)}
    for key, param in new_params.items():
        if param.get("required") and not (old_params.get(key) or {}).get("required"):
            found.append(f"{where}: {key[0]} parameter {key[1]!r} is required now")
    for key in sorted(old_params.keys() - new_params.keys()):
        found.append(f"{where}: {key[0]} parameter {key[1]!r} removed")

    old_body = _json_schema((before.get("requestBody") or {}).get("content"))
    new_body = _json_schema((after.get("requestBody") or {}).get("content"))
    if (after.get("requestBody") or {}).get("required") and not (
        before.get("requestBody") or {}
    ).get("required"):
        found.append(f"{where}: a request body is required now")
    if old_body is not None and new_body is not None:
        found += _compare(f"{where} request", old, new, old_body, new_body, "request", 0)

    new_responses = after.get("responses") or {}
    for code, response in (before.get("responses") or {}).items():
        if not str(code).startswith("2"):
            continue
        if code not in new_responses:
            found.append(f"{where}: response {code} removed")
            continue
        old_reply = _json_schema(response.get("content"))
        new_reply = _json_schema(new_responses[code].get("content"))
        if old_reply is not None and new_reply is None:
            found.append(f"{where}: response {code} no longer JSON")
        elif old_reply is not None:
            found += _compare(f"{where} {code}", old, new, old_reply, new_reply, "response", 0)
    return found


def _params(spec: dict[str, Any], operation: dict[str, Any]) -> list[dict[str, Any]]:
    return [_resolve(spec, param) for param in operation.get("parameters") or []]


def _json_schema(content: dict[str, Any] | None) -> dict[str, Any] | None:
    if not content:
        return None
    media = content.get("application/json")
    return media.get("schema") if media else None


def _resolve(spec: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    seen = set()
    while isinstance(node, dict) and "$ref" in node and node["$ref"] not in seen:
        seen.add(node["$ref"])
        target: Any = spec
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        node = target
    return node if isinstance(node, dict) else {}


def _types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a schema admits (an empty set: any)."""
    if "type" in schema:
        declared = schema["type"]
        return set(declared) if isinstance(declared, list) else {declared}
    return set()


def _compare(
    where: str,
    old: dict[str, Any],
    new: dict[str, Any],
    before: dict[str, Any],
    after: dict[str, Any],
    direction: str,
    depth: int,
) -> list[str]:
    if depth > MAX_DEPTH:
        return []
    before, after = _resolve(old, before), _resolve(new, after)
    found = []
    old_types, new_types = _types(before), _types(after)
    # An integer is a number; a reply may narrow, a request may widen.
    widened = new_types - old_types - ({"integer"} if "number" in old_types else set())
    narrowed = old_types - new_types - ({"integer"} if "number" in new_types else set())
    if old_types and new_types:
        if direction == "response" and widened:
            found.append(f"{where}: type {sorted(old_types)} became {sorted(new_types)}")
        if direction == "request" and narrowed:
            found.append(f"{where}: type {sorted(old_types)} became {sorted(new_types)}")
    if direction == "response" and after.get("nullable") and not before.get("nullable"):
        found.append(f"{where}: may be null now")
    if direction == "request" and before.get("nullable") and not after.get("nullable"):
        found.append(f"{where}: null is no longer accepted")
    if direction == "request" and "enum" in after:
        dropped = [v for v in before.get("enum", []) if v not in after["enum"]]
        if dropped or "enum" not in before:
            found.append(f"{where}: no longer accepts {dropped or 'any value'}")

    old_props = before.get("properties") or {}
    new_props = after.get("properties") or {}
    if direction == "response":
        for name in old_props:
            if name not in new_props:
                found.append(f"{where}: field {name!r} removed")
    else:
        for name in set(after.get("required") or []) - set(before.get("required") or []):
            found.append(f"{where}: field {name!r} is required now")
    for name in old_props.keys() & new_props.keys():
        found += _compare(
            f"{where}.{name}", old, new, old_props[name], new_props[name], direction, depth + 1
        )
    if "items" in before and "items" in after:
        found += _compare(
            f"{where}[]", old, new, before["items"], after["items"], direction, depth + 1
        )
    return found
