"""Run kinds: each declares its spec fields, exit causes and event types here.

A kind is a folder ``workers/kinds/<name>/`` whose ``__init__.py`` holds
``KIND = Kind(...)`` (standard library only: the platform imports it to
validate submissions) and whose runner module does the work on the host.
Kinds outside this package, a site's own or a test's, are named in
``NPULAB_KINDS`` (comma-separated module paths, each with a ``KIND``), which
the web and the host worker both read. The generic code asks this registry
and never names a kind.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import threading
from typing import Any, Callable

from workers.contract import capabilities as contract_capabilities
from workers.contract.events import CORE_EVENT_TYPES, EventType
from workers.contract.exits import CORE_CAUSES, Cause
from workers.contract.spec import Field, SpecError, clean_fields, ranks_errors

BUILTIN_PACKAGE = "workers.kinds"
EXTRA_KINDS_ENV = "NPULAB_KINDS"


class Kind:
    """What the platform and a host must know of one run kind.

    ``runner``: the module with ``run(ctx) -> Outcome``, imported only in the
    run's own process. ``causes``: exit causes only this kind's runner
    reports. ``event_types``: the event types it adds to events.jsonl.
    ``check``: what is wrong across fields of a spec whose fields are each
    valid (``ops`` is required when ``op_set`` is ``list``), by field name.
    ``capabilities``: names from ``workers.contract.capabilities`` (checkpoints,
    profiling); the kind gets each one's spec fields, and its event types may
    be written by its runs.
    ``host_labels``: the host labels a run of this spec needs beyond those it asks
    for (a MindSpore training run: a host with MindSpore).
    ``placements``: for a spec whose parts must each run on a host of their own (a parity
    run's sides on two hosts), one entry per node rank, node rank 0 first (see
    ``placements``); [] for a run on ``hosts`` alike hosts.
    """

    def __init__(
        self,
        name: str,
        title: str,
        runner: str,
        fields: list[Field],
        causes: tuple[Cause, ...] = (),
        event_types: tuple[EventType, ...] = (),
        check: Callable[[dict[str, Any]], dict[str, str]] | None = None,
        capabilities: tuple[str, ...] = (),
        host_labels: Callable[[dict[str, Any]], list[str]] | None = None,
        placements: Callable[[dict[str, Any]], list[dict[str, Any]]] | None = None,
    ) -> None:
        self.name = name
        self.title = title
        self.runner = runner
        self.capabilities = tuple(capabilities)
        # The module that declared it (set by ``load``).
        self.module = ""
        extra = [
            field
            for capability in self.capabilities
            for field in contract_capabilities.get(capability).fields
        ]
        self.fields = [Field("kind", "string", choices=(name,)), *fields, *extra]
        self.by_name = {field.name: field for field in self.fields}
        self.causes = {cause.name: cause for cause in causes}
        self.event_types = {event_type.name: event_type for event_type in event_types}
        self.check = check
        self._host_labels = host_labels
        self._placements = placements

    def validate(self, doc: dict[str, Any]) -> dict[str, Any]:
        spec = clean_fields(self.fields, doc, self.name)
        errors = self.cross_field_problems(spec)
        if errors:
            raise SpecError(errors)
        return spec

    def cross_field_problems(self, spec: dict[str, Any]) -> dict[str, str]:
        """What is wrong across the fields of a spec whose fields are each valid: a rank
        the run does not have (hosts × devices), then the kind's own ``check``."""
        errors = ranks_errors(self.fields, spec)
        errors.update(self.check(spec) if self.check else {})
        return errors

    def host_labels(self, spec: dict[str, Any]) -> list[str]:
        """The host labels a valid ``spec`` of this kind needs."""
        return list(self._host_labels(spec)) if self._host_labels else []

    def placements(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """What each node rank of a valid ``spec`` asks of its own host, node rank 0 first;
        [] when its hosts are alike (the run's ``host``, pool and ``labels``, ``hosts`` of them).

        Each entry: ``field``, the spec field that asks (a refusal names ``<field>.host``);
        ``role``, how reasons and pages name the placement ("side b"); ``device_type`` and
        the keys of ``workers.contract.gang.PLACEMENT_FIELDS`` (``host``, ``pool``,
        ``labels``), each empty for the run's own. Such placements run apart: no rendezvous.
        """
        return [dict(entry) for entry in self._placements(spec)] if self._placements else []

    def json_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "title": self.title,
            "properties": {field.name: field.json_schema() for field in self.fields},
            "required": [field.name for field in self.fields if field.required],
            "additionalProperties": False,
        }

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "fields": [field.describe() for field in self.fields],
            "causes": sorted(self.causes),
            "event_types": sorted(self.event_types),
            "capabilities": list(self.capabilities),
        }

    def can(self, capability: str) -> bool:
        """Whether the kind declares ``capability``."""
        return capability in self.capabilities


class KindConflict(ValueError):
    """Two kinds claim one name, one cause or one event type."""


_kinds: dict[str, Kind] = {}
# Merged once per registration: ingestion and every serialized run ask for them.
_causes: dict[str, Cause] = dict(CORE_CAUSES)
_event_types: dict[str, EventType] = dict(CORE_EVENT_TYPES)
# A capability's event types, by the capability: a run may write them if its kind declares it.
_event_type_capabilities: dict[str, str] = {}
for _capability in contract_capabilities.CAPABILITIES.values():
    _event_types.update(_capability.event_types)
    _event_type_capabilities.update(dict.fromkeys(_capability.event_types, _capability.name))
_RESERVED = {*CORE_EVENT_TYPES, *_event_type_capabilities}
# A kind's own event types, by the kind that declares them (core types are anyone's).
_event_type_owners: dict[str, str] = {}
_loaded = False
_lock = threading.RLock()


def register(kind: Kind) -> Kind:
    """Add a kind; its name, causes and event types must be its own."""
    with _lock:
        if kind.name in _kinds and _kinds[kind.name] is not kind:
            raise KindConflict(f"run kind {kind.name!r} is declared twice")
        for name in kind.causes:
            if name in CORE_CAUSES or any(name in other.causes for other in _others(kind)):
                raise KindConflict(f"exit cause {name!r} of kind {kind.name} is taken")
        for name in kind.event_types:
            taken = name in _RESERVED or any(name in other.event_types for other in _others(kind))
            if taken:
                raise KindConflict(f"event type {name!r} of kind {kind.name} is taken")
        _kinds[kind.name] = kind
        _causes.update(kind.causes)
        _event_types.update(kind.event_types)
        _event_type_owners.update(dict.fromkeys(kind.event_types, kind.name))
    return kind


def _others(kind: Kind) -> list[Kind]:
    return [other for other in _kinds.values() if other.name != kind.name]


def load(strict: bool = True) -> dict[str, str]:
    """Import every kind declaration once: the built-in folders, then NPULAB_KINDS.

    ``strict=False`` (the CLI, which may run where a site's kind named in NPULAB_KINDS
    is not importable) registers what it can and answers what it could not, by module;
    the web and the host worker load strictly: a kind that is missing there is an error.
    """
    global _loaded
    problems: dict[str, str] = {}
    with _lock:
        if _loaded:
            return problems
        package = importlib.import_module(BUILTIN_PACKAGE)
        modules = [
            f"{BUILTIN_PACKAGE}.{info.name}"
            for info in pkgutil.iter_modules(package.__path__)
            if info.ispkg
        ]
        modules += [m.strip() for m in os.environ.get(EXTRA_KINDS_ENV, "").split(",") if m.strip()]
        for module_name in modules:
            try:
                _load_one(module_name)
            except (ImportError, KindConflict) as exc:
                if strict:
                    raise
                problems[module_name] = str(exc)
        _loaded = True
    return problems


def _load_one(module_name: str) -> None:
    module = importlib.import_module(module_name)
    kind = getattr(module, "KIND", None)
    if not isinstance(kind, Kind):
        raise KindConflict(f"{module_name} declares no KIND = Kind(...)")
    # Where it was declared: a kind outside workers.kinds may bring its web app there.
    kind.module = module_name
    register(kind)


def all_kinds() -> list[Kind]:
    """Every kind, in name order."""
    load()
    return [_kinds[name] for name in sorted(_kinds)]


def get(name: str) -> Kind | None:
    load()
    return _kinds.get(name)


def names() -> list[str]:
    return [kind.name for kind in all_kinds()]


def causes() -> dict[str, Cause]:
    """Every exit cause: the core ones and those the kinds declare (do not change it)."""
    load()
    return _causes


def cause(name: str) -> Cause | None:
    return causes().get(name)


def event_types() -> dict[str, EventType]:
    """Every event type: the core ones and those the kinds add (do not change it)."""
    load()
    return _event_types


def event_type_owners() -> dict[str, str]:
    """Each kind-declared event type and the kind it belongs to (do not change it)."""
    load()
    return _event_type_owners


def event_type_capabilities() -> dict[str, str]:
    """Each capability's event type and the capability it belongs to (do not change it)."""
    return _event_type_capabilities


def validate(doc: Any) -> dict[str, Any]:
    """Return the spec with defaults filled in, or raise SpecError naming every bad field."""
    if not isinstance(doc, dict):
        raise SpecError({"spec": "must be a JSON object"})
    kind_name = doc.get("kind")
    known = ", ".join(names())
    if kind_name is None:
        raise SpecError({"kind": "this field is required; one of: " + known})
    kind = get(kind_name) if isinstance(kind_name, str) else None
    if kind is None:
        raise SpecError({"kind": f"unknown kind {kind_name!r}; one of: " + known})
    return kind.validate(doc)
