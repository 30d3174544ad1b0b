"""Control-plane tasks of the hosts app."""

from __future__ import annotations

from celery import shared_task

from npulab.hosts.services import sweep_hosts


@shared_task(name="hosts.sweep_hosts", ignore_result=True)
def sweep_hosts_task() -> int:
    return sweep_hosts()
