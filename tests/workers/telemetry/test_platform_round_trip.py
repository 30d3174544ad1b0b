"""The host side's samples, sent by the real sender to the real agent endpoint."""

from __future__ import annotations

from typing import Any

import pytest

from npulab.hosts.services import do_issue_host_token
from npulab.telemetry.models import DeviceTelemetry
from tests.conftest import register
from tests.factories import HostFactory
from tests.workers.telemetry.conftest import INFO, FakeTool
from workers import telemetry
from workers.host.client import PlatformClient
from workers.host.telemetry import TelemetrySender


class Replies:
    """The real client, keeping each reply."""

    def __init__(self, client: PlatformClient) -> None:
        self.client = client
        self.replies: list[dict[str, Any]] = []

    def telemetry(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        reply = self.client.telemetry(samples)
        self.replies.append(reply)
        return reply


@pytest.mark.django_db(transaction=True)
def test_npu_samples_of_the_warning_cards_are_taken_by_the_platform(
    live_server: Any, npu_smi: FakeTool
) -> None:
    npu_smi.answer('"info"', next(INFO.glob("24_*.txt")))
    # The host of that capture: eight NPUs, as its worker registers them.
    host = register(HostFactory(name="npu-09"), "npu", 8)
    client = PlatformClient(live_server.url, do_issue_host_token(host))
    # The live server's request thread would keep its database connection with a
    # keep-alive session, and the test database could not be dropped.
    client._headers["Connection"] = "close"
    replies = Replies(client)
    TelemetrySender(replies, "npu", [3, 7], sample=telemetry.sample).tick()  # type: ignore[arg-type]
    assert replies.replies[0]["accepted"] == 3
    assert replies.replies[0]["rejected"] == []
    rows = {row.device_index: row for row in DeviceTelemetry.objects.filter(host=host)}
    assert set(rows) == {3, 7, None}
    assert rows[3].health == "WARNING"
