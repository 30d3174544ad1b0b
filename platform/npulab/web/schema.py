"""How the API's schema document is ordered: a user's endpoints first, the host agent's last."""

from __future__ import annotations

from typing import Any

from drf_spectacular.plumbing import alpha_operation_sorter

# Every endpoint a host worker calls with its host token (npulab.agent).
AGENT_PREFIX = "/api/v1/agent/"


def agent_endpoints_last(endpoint: tuple[str, str, str, Any]) -> tuple[bool, Any]:
    """``SORT_OPERATIONS``: by path and method, the agent's endpoints after all the others.

    Swagger UI lists tags in the order their first operation comes, so this
    alone puts the agent section last; ReDoc follows ``TAGS``.
    """
    return endpoint[0].startswith(AGENT_PREFIX), alpha_operation_sorter(endpoint)
