"""The host worker's Celery app: one task, consumed from the host's own queue.

The platform sends ``EXECUTE_RUN(run_id, attempt)`` to the host's queue;
the database is the truth about the run, the message only says "go".
"""

from __future__ import annotations

from celery import Celery
from celery.signals import worker_shutting_down

from workers.contract.tasks import EXECUTE_RUN
from workers.host.agent import HostAgent

app = Celery("npulab-host")
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    # One message per free slot: a prefetched run would wait behind a busy one.
    worker_prefetch_multiplier=1,
    # Acknowledge on receipt: a run is never started twice by redelivery.
    # A worker that dies mid-run is found by missing heartbeats instead.
    task_acks_late=False,
    task_ignore_result=True,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    worker_redirect_stdouts=False,
)

_agent: HostAgent | None = None


def bind_agent(agent: HostAgent) -> None:
    global _agent
    _agent = agent


@app.task(name=EXECUTE_RUN)
def execute_run(run_id: int, attempt: int) -> None:
    if _agent is None:
        raise RuntimeError("the host agent is not bound; start the worker with `python -m workers`")
    _agent.execute(run_id, attempt)


@worker_shutting_down.connect
def _stop_runs(**kwargs: object) -> None:
    if _agent is not None:
        _agent.shutdown()
