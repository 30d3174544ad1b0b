"""The control plane's tick: every periodic pass of the apps, one after another, in one task.

One message and one task a tick instead of one per pass: the idle control worker and
its beat did most of their work sending, receiving and logging four tasks a second at
a 1 s tick. In one task the passes also run in a fixed order (settings.CONTROL_TICK),
so a host found offline has its runs swept in the same tick and placed again at its end.
"""

from __future__ import annotations

import logging

from celery import current_app, shared_task
from django.conf import settings

from workers.contract.tasks import TICK

log = logging.getLogger(__name__)


@shared_task(name=TICK, ignore_result=True)
def tick_task() -> list[str]:
    """Run each task of settings.CONTROL_TICK here, in order; the names of those that failed."""
    failed = []
    for name in settings.CONTROL_TICK:
        try:
            current_app.tasks[name]()
        except Exception:
            # The passes are independent: one that fails (a bug, the database gone) leaves the
            # others to run, and the next tick runs it again.
            log.exception("%s failed in the control tick", name)
            failed.append(name)
    return failed
