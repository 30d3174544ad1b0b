"""Hosts and telemetry for the health tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from npulab.hosts.models import Host
from npulab.telemetry.services import record_samples
from tests.conftest import make_operator, register, token_client
from tests.factories import HostFactory, UserFactory


@pytest.fixture
def npu_host(db: None) -> Callable[..., Host]:
    def make(name: str = "npu-01", devices: int = 8) -> Host:
        return register(HostFactory(name=name), "npu", devices)

    return make


@pytest.fixture
def send() -> Callable[..., None]:
    """Send samples through the telemetry store, as the agent endpoint does; each call later."""
    clock = {"t": time.time() - 600}

    def send(host: Host, make: Callable[[float], list[dict[str, Any]]]) -> None:
        clock["t"] += 10
        result = record_samples(host, make(clock["t"]))
        assert result.stored, result.rejected

    return send


@pytest.fixture
def operator(db: None) -> Any:
    return make_operator(UserFactory(username="oper"))


@pytest.fixture
def operator_api(operator: Any):
    return token_client(operator)
