"""Tokens with chosen scopes and lifetimes, for the scope and expiry tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from npulab.accounts.models import ApiToken
from npulab.accounts.services import do_issue_api_token


@pytest.fixture
def token_for(db: None) -> Callable[..., tuple[APIClient, ApiToken]]:
    """``token_for(user, scopes=[...], expires=...)``: a client with that token, and the token."""

    def make(user: Any, **kwargs: Any) -> tuple[APIClient, ApiToken]:
        token, plain = do_issue_api_token(user, **kwargs)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {plain}")
        return client, token

    return make
