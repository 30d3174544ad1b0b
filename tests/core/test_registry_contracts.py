"""The lists that name every kind or capability outside its own folders are checked against
the registries (workers.contract.kinds, npulab.extensions): a new kind that is not placed in
the import contracts, or a contract naming a kind that is gone, fails here."""

from __future__ import annotations

import tomllib

from django.conf import settings

from npulab import extensions
from tests.paths import REPO_DIR
from workers.contract import capabilities, kinds

BUILTIN = "workers.kinds."


def contracts() -> dict[str, dict]:
    document = tomllib.loads((REPO_DIR / "pyproject.toml").read_text())
    return {c["id"]: c for c in document["tool"]["importlinter"]["contracts"]}


def builtin_kinds() -> list[str]:
    return sorted(k.name for k in kinds.all_kinds() if k.module.startswith(BUILTIN))


def builtin_kind_apps() -> list[str]:
    found = extensions.kind_apps()
    return sorted(found[name] for name in builtin_kinds() if name in found)


def test_the_kind_independence_contracts_list_exactly_the_registered_kinds() -> None:
    found = contracts()
    assert sorted(found["web-kinds-independent"]["modules"]) == builtin_kind_apps()
    host = sorted(BUILTIN + name for name in builtin_kinds())
    assert sorted(found["host-kinds-independent"]["modules"]) == host
    assert sorted(found["workers-host-reaches-kinds-by-entry"]["forbidden_modules"]) == host


def test_every_kind_and_capability_app_has_a_layer() -> None:
    layers = contracts()["layers"]["layers"]
    placed = {name.strip() for layer in layers for name in layer.split("|")}
    apps = [*builtin_kind_apps(), *extensions.CAPABILITY_APPS.values()]
    assert {app.removeprefix("npulab.") for app in apps} <= placed


def test_every_capability_has_a_web_app_and_the_runs_contract_names_them() -> None:
    assert set(extensions.CAPABILITY_APPS) == set(capabilities.CAPABILITIES)
    forbidden = contracts()["runs-without-capabilities"]["forbidden_modules"]
    assert sorted(forbidden) == sorted(extensions.CAPABILITY_APPS.values())


def test_installed_apps_come_from_the_registry() -> None:
    # The test-only kind is named in NPULAB_KINDS alone: its app joins through the loop.
    for app in extensions.installed_apps():
        assert app in settings.INSTALLED_APPS
    assert "tests.kinds.echo" in extensions.installed_apps()
