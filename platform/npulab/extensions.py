"""The apps that plug into the platform, found from the registries and mounted in one loop.

The way NetBox mounts its plug-ins: each run kind's web app (``npulab.<kind>``,
or the package that declared a kind named in ``NPULAB_KINDS`` when it is a
Django app, like the tests' echo kind) and each capability's app
(``CAPABILITY_APPS``) is added to ``INSTALLED_APPS`` here, and whatever it
brings is mounted here:

| the app's | becomes |
| --- | --- |
| ``urls.py`` (with ``app_name``) | its pages, under ``AppConfig.url_prefix`` (``<label>/``) |
| ``api/urls.py`` | its routes in the user API, ``/api/v1/``, names in the ``api`` namespace |
| ``templates/``, ``static/`` | found by Django's app directories loader and finder |
| ``README.md`` | its docs page |

Nothing else (settings, ``npulab/urls.py``, ``npulab/api_urls.py``) names a kind
or a capability's app; a new one is one folder per side and one registration.
"""

from __future__ import annotations

from importlib import import_module
from importlib.util import find_spec
from typing import Any

from workers.contract import kinds as contract_kinds
from workers.contract.capabilities import CHECKPOINTS, HANDOFF, PROFILING

# The app that implements each capability on the web side.
CAPABILITY_APPS = {
    CHECKPOINTS: "npulab.checkpoints",
    PROFILING: "npulab.profiles",
    HANDOFF: "npulab.handoff",
}
BUILTIN_PACKAGE = "npulab"


def _exists(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def kind_app(kind: contract_kinds.Kind) -> str | None:
    """The web app of a kind: ``npulab.<kind>``, else its declaring package if that is an app."""
    builtin = f"{BUILTIN_PACKAGE}.{kind.name}"
    if _exists(builtin):
        return builtin
    if kind.module and _exists(f"{kind.module}.apps"):
        return kind.module
    return None


def kind_apps() -> dict[str, str]:
    """Each kind that has a web app, and the app, in name order."""
    found = {kind.name: kind_app(kind) for kind in contract_kinds.all_kinds()}
    return {name: app for name, app in found.items() if app}


def installed_apps() -> list[str]:
    """What settings add to ``INSTALLED_APPS``: the kinds' apps, then the capabilities'."""
    return [*kind_apps().values(), *CAPABILITY_APPS.values()]


def _urls(app: str, submodule: str) -> Any | None:
    name = f"{app}.{submodule}"
    return import_module(name) if _exists(name) else None


def page_urlpatterns() -> list[Any]:
    """Each extension app's pages, mounted under its prefix in its own namespace."""
    from django.apps import apps
    from django.urls import include, path

    patterns = []
    for app in installed_apps():
        module = _urls(app, "urls")
        if module is None:
            continue
        config = apps.get_containing_app_config(module.__name__)
        prefix = getattr(config, "url_prefix", f"{config.label}/")
        patterns.append(path(prefix, include(module)))
    return patterns


def api_urlpatterns() -> list[Any]:
    """Each extension app's API routes, joined to the ``api`` namespace."""
    patterns = []
    for app in installed_apps():
        module = _urls(app, "api.urls")
        if module is not None:
            patterns += module.urlpatterns
    return patterns
