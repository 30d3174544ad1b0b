"""The control worker's telemetry task: minute rollups and retention (Celery beat)."""

from __future__ import annotations

from celery import shared_task

from npulab.telemetry.services import do_roll_up_telemetry
from workers.contract.tasks import ROLL_UP_TELEMETRY


@shared_task(name=ROLL_UP_TELEMETRY, ignore_result=True)
def roll_up_telemetry_task() -> dict[str, int]:
    return do_roll_up_telemetry()
