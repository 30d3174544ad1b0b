"""Control-plane tasks of health: the periodic evaluation and the webhook."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from npulab.health.models import HealthChange
from npulab.health.services import iso, sweep_health
from workers.contract.tasks import DELIVER_HEALTH_WEBHOOK, SWEEP_HEALTH

log = logging.getLogger(__name__)

WEBHOOK_EVENT = "npulab.health.changed"
MAX_ERROR_CHARS = 500
# Seconds before retry N (1-based): 10, 20, 40 ... capped at 10 minutes.
BACKOFF_BASE_S = 10
BACKOFF_MAX_S = 600


@shared_task(name=SWEEP_HEALTH, ignore_result=True)
def sweep_health_task() -> int:
    return sweep_health()


def webhook_payload(change: HealthChange) -> dict:
    """What the webhook receives for one change (docs/health.md, "Webhook")."""
    host = change.host
    return {
        "event": WEBHOOK_EVENT,
        "id": change.pk,
        "host": host.name,
        "device": change.device,
        "previous": change.previous,
        "state": change.state,
        "reasons": change.reasons,
        "changed_at": iso(change.at),
        "by": change.by.get_username() if change.by else None,
        "note": change.note,
        "url": host.get_absolute_url(),
    }


class WebhookFailed(Exception):
    """The receiver could not be reached or did not answer 2xx."""


@shared_task(name=DELIVER_HEALTH_WEBHOOK, bind=True, ignore_result=True)
def deliver_webhook_task(self, change_id: int) -> bool:
    """POST one change to NPULAB_HEALTH_WEBHOOK_URL; retried with back-off, never raised."""
    url = settings.NPULAB["HEALTH_WEBHOOK_URL"]
    change = HealthChange.objects.select_related("host", "by").filter(pk=change_id).first()
    if not url or change is None or change.webhook_delivered_at is not None:
        return False
    if urlsplit(url).scheme not in ("http", "https"):
        # urllib would open file: and the like; only a web receiver is meant.
        log.error("NPULAB_HEALTH_WEBHOOK_URL must be an http(s) URL; change %s not sent", change_id)
        HealthChange.objects.filter(pk=change_id).update(webhook_error="not an http(s) URL")
        return False
    body = json.dumps(webhook_payload(change)).encode()
    request = urllib.request.Request(  # noqa: S310 - the scheme is checked above
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "npulab-health-webhook"},
    )
    try:
        with urllib.request.urlopen(  # noqa: S310 - the scheme is checked above
            request, timeout=settings.NPULAB["HEALTH_WEBHOOK_TIMEOUT_S"]
        ) as response:
            if not 200 <= response.status < 300:
                raise WebhookFailed(f"HTTP {response.status}")
    except (OSError, WebhookFailed, urllib.error.URLError) as exc:
        error = f"attempt {self.request.retries + 1}: {exc}"[:MAX_ERROR_CHARS]
        HealthChange.objects.filter(pk=change_id).update(webhook_error=error)
        retries = settings.NPULAB["HEALTH_WEBHOOK_RETRIES"]
        if self.request.retries >= retries:
            log.warning("health webhook for change %s given up: %s", change_id, error)
            return False
        countdown = min(BACKOFF_BASE_S * 2**self.request.retries, BACKOFF_MAX_S)
        raise self.retry(countdown=countdown, max_retries=retries) from exc
    HealthChange.objects.filter(pk=change_id).update(
        webhook_delivered_at=timezone.now(), webhook_error=""
    )
    return True
