"""Control-plane tasks of the hosts app."""

from __future__ import annotations

from celery import shared_task

from npulab.hosts.services import sweep_hosts
from workers.contract.tasks import SWEEP_HOSTS


@shared_task(name=SWEEP_HOSTS, ignore_result=True)
def sweep_hosts_task() -> int:
    return sweep_hosts()
