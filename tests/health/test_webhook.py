"""The webhook: a JSON POST per state change to a real local receiver, retried with back-off."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from npulab.health.models import HealthChange
from npulab.health.services import do_drain_host
from npulab.health.tasks import deliver_webhook_task
from workers.contract.tasks import DELIVER_HEALTH_WEBHOOK

pytestmark = pytest.mark.django_db


class Receiver:
    """An HTTP server on a free port that answers with the statuses it is given, then 200."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.statuses: list[int] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                receiver.bodies.append(
                    {
                        "json": json.loads(self.rfile.read(length)),
                        "type": self.headers["Content-Type"],
                    }
                )
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(settings) -> Iterator[Receiver]:
    receiver = Receiver()
    settings.NPULAB = {
        **settings.NPULAB,
        "HEALTH_WEBHOOK_URL": receiver.url,
        "HEALTH_WEBHOOK_RETRIES": 3,
    }
    yield receiver
    receiver.close()


def drained(operator, host, capture) -> HealthChange:
    with capture(execute=True):
        do_drain_host(host, operator, "bios update")
    return HealthChange.objects.get(host=host, device=None)


def test_every_change_is_queued_for_the_webhook_and_posted_as_json(
    receiver, operator, cpu_host, django_capture_on_commit_callbacks, sent_tasks
) -> None:
    change = drained(operator, cpu_host, django_capture_on_commit_callbacks)
    # Queued on the control queue after commit, not sent from the request.
    assert {"task": DELIVER_HEALTH_WEBHOOK, "args": [change.pk], "queue": "control"} in sent_tasks
    assert receiver.bodies == []
    assert deliver_webhook_task.apply(args=[change.pk]).get() is True
    (body,) = receiver.bodies
    assert body["type"] == "application/json"
    payload = body["json"]
    assert {k: payload[k] for k in ("event", "id", "host", "device", "previous", "state")} == {
        "event": "npulab.health.changed",
        "id": change.pk,
        "host": "cpu-01",
        "device": None,
        "previous": "healthy",
        "state": "drained",
    }
    assert (payload["by"], payload["note"], payload["url"]) == (
        "oper",
        "bios update",
        "/hosts/cpu-01/",
    )
    change.refresh_from_db()
    assert change.webhook_delivered_at is not None
    # Delivered once: a repeated message posts nothing again.
    assert deliver_webhook_task.apply(args=[change.pk]).get() is False
    assert len(receiver.bodies) == 1


def test_a_failing_receiver_is_retried_until_it_answers(
    receiver, operator, cpu_host, django_capture_on_commit_callbacks
) -> None:
    change = drained(operator, cpu_host, django_capture_on_commit_callbacks)
    receiver.statuses = [500, 503]
    assert deliver_webhook_task.apply(args=[change.pk]).get() is True
    assert len(receiver.bodies) == 3
    change.refresh_from_db()
    assert (change.webhook_delivered_at is not None, change.webhook_error) == (True, "")


def test_a_receiver_that_never_answers_is_given_up_and_noted(
    receiver, operator, cpu_host, django_capture_on_commit_callbacks
) -> None:
    change = drained(operator, cpu_host, django_capture_on_commit_callbacks)
    receiver.statuses = [500] * 10
    assert deliver_webhook_task.apply(args=[change.pk]).get() is False
    assert len(receiver.bodies) == 1 + 3
    change.refresh_from_db()
    assert change.webhook_delivered_at is None
    assert change.webhook_error.startswith("attempt 4: HTTP Error 500")


def test_no_url_no_webhook(
    operator, cpu_host, django_capture_on_commit_callbacks, sent_tasks
) -> None:
    drained(operator, cpu_host, django_capture_on_commit_callbacks)
    assert [t for t in sent_tasks if t["task"] == DELIVER_HEALTH_WEBHOOK] == []


def test_only_a_web_url_is_posted_to(
    settings, tmp_path, operator, cpu_host, django_capture_on_commit_callbacks
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("not for the webhook")
    settings.NPULAB = {**settings.NPULAB, "HEALTH_WEBHOOK_URL": secret.as_uri()}
    change = drained(operator, cpu_host, django_capture_on_commit_callbacks)
    assert deliver_webhook_task.apply(args=[change.pk]).get() is False
    change.refresh_from_db()
    assert change.webhook_error == "not an http(s) URL"
