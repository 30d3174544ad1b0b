"""Parts of a page that apps above the page's owner add, registered from ``AppConfig.ready``.

An app's detail page may show what higher apps know about its object (the
host page lists the runs on the host); the owner cannot import them without
an upward dependency. It declares a ``PageParts`` instead, and each higher
app adds a function that gives its part of the page's context for the user
viewing it (who may not see everything a part knows: another project's runs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# part(obj, viewer): the page's object and the user looking at it.
PagePart = Callable[[Any, Any], dict[str, Any]]


class PageParts:
    """The context functions registered for one page, called in registration order."""

    def __init__(self, page: str) -> None:
        self.page = page
        self._parts: list[PagePart] = []

    def add(self, part: PagePart) -> PagePart:
        """Add ``part(obj, viewer)``'s keys to the page's context; adding twice is adding once."""
        if part not in self._parts:
            self._parts.append(part)
        return part

    def context(self, obj: Any, viewer: Any) -> dict[str, Any]:
        context: dict[str, Any] = {}
        for part in self._parts:
            context.update(part(obj, viewer))
        return context

    def __repr__(self) -> str:
        return f"PageParts({self.page!r}, {[part.__qualname__ for part in self._parts]})"
