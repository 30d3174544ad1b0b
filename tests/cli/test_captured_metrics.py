"""``npulab runs show`` lists a run's metrics with their source, and its logged params and tags."""

from __future__ import annotations

import pytest
from django.utils import timezone

from npulab.runs.events import store_events
from tests.cli.conftest import finished_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_runs_show_lists_each_metric_with_its_source(npulab, owner) -> None:
    run = finished_run(owner, kind="training")
    events = [
        {"type": "metric", "time": 1.0, "key": "loss", "step": 1, "value": 0.5},
        {"type": "metric", "time": 1.0, "key": "loss", "step": 1, "value": 0.7, "source": "stdout"},
        {"type": "metric", "time": 1.0, "key": "ppl", "step": 3, "value": 9.0, "source": "stdout"},
        {"type": "param", "time": 1.0, "key": "lr", "value": "0.1", "source": "mlflow"},
        {"type": "tag", "time": 1.0, "key": "team", "value": "nlp", "source": "mlflow"},
    ]
    store_events(run, events, timezone.now())
    shown = npulab("runs", "show", str(run.pk))
    assert shown.exit_code == 0, shown.output
    rows = [line.split() for line in shown.stdout.splitlines()]
    assert ["loss", "track", "1", "1"] in rows
    assert ["loss", "stdout", "1", "1"] in rows
    assert ["ppl", "stdout", "1", "3"] in rows
    assert ["param", "lr", "0.1"] in rows
    assert ["tag", "team", "nlp"] in rows
