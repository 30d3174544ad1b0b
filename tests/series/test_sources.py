"""A run's series by source: one key from two sources is two series, each read on its own."""

from __future__ import annotations

import pytest
from django.utils import timezone

from npulab.runs.events import store_events
from npulab.runs.models import RunEvent
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.selectors import logged_parameters, metric_keys
from npulab.runs.services import do_claim_run, do_submit_run
from npulab.series.models import MetricSeries
from npulab.series.owners import Owner
from npulab.series.reads import read
from workers.contract.capture import SOURCES

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(owner, cpu_host):
    found = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    place_queued_runs()
    return do_claim_run(cpu_host, found.pk, 1)


def metric(key: str, step: int, value: float | None, source: str | None = None, **extra) -> dict:
    event = {"type": "metric", "time": 1.0 + step, "key": key, "step": step, "value": value}
    if source is not None:
        event["source"] = source
    return {**event, **extra}


def test_two_sources_of_one_key_are_kept_and_told_apart(api, run) -> None:
    events = [metric("loss", step, 1.0 / (step + 1)) for step in range(3)]
    events += [metric("loss", step, 9.0, "stdout") for step in range(5)]
    events += [metric("loss", 0, None, "mlflow", nonfinite="nan")]
    store_events(run, events, timezone.now())

    found = dict(MetricSeries.objects.filter(run=run).values_list("source", "points"))
    assert found == {"track": 3, "stdout": 5, "mlflow": 1}
    url = f"/api/v1/runs/{run.pk}/metrics/"
    listed = api.get(url).json()["metrics"]
    assert [(m["key"], m["source"], m["points"]) for m in listed] == [
        ("loss", "track", 3),
        ("loss", "mlflow", 1),
        ("loss", "stdout", 5),
    ]
    # Without a source, track's; with one, that source's.
    assert api.get(url, {"key": "loss"}).json()["total"] == 3
    stdout = api.get(url, {"key": "loss", "source": "stdout"}).json()
    assert (stdout["source"], stdout["total"]) == ("stdout", 5)
    assert api.get(url, {"key": "loss", "source": "mlflow"}).json()["points"] == [[0, None]]
    bad = api.get(url, {"key": "loss", "source": "carrier-pigeon"})
    assert bad.status_code == 400
    assert "source" in str(bad.json())
    assert metric_keys(run) == ["loss", "loss (mlflow)", "loss (stdout)"]


def test_a_run_with_only_captured_metrics_reads_them_without_naming_the_source(api, run) -> None:
    store_events(run, [metric("loss", 1, 0.5, "tensorboard")], timezone.now())
    got = api.get(f"/api/v1/runs/{run.pk}/metrics/", {"key": "loss"}).json()
    assert (got["source"], got["points"]) == ("tensorboard", [[1, 0.5]])


def test_without_a_source_a_read_takes_them_in_the_order_of_sources(run) -> None:
    owner = Owner.of_run(run.pk)
    for count, source in enumerate(reversed(SOURCES), start=1):
        store_events(
            run, [metric("loss", step, 1.0, source) for step in range(count)], timezone.now()
        )
        # The source stored last comes first in SOURCES: each read takes the newest one.
        assert read(owner, "loss").total == count
    assert read(Owner.of_run(run.pk, "stdout"), "loss").total == 1
    assert read(owner, "accuracy").total == 0


def test_an_unknown_source_is_kept_as_a_visible_error(run) -> None:
    store_events(run, [metric("loss", 1, 0.5, "fax")], timezone.now())
    assert not MetricSeries.objects.filter(run=run).exists()
    [error] = RunEvent.objects.filter(run=run, type="log")
    assert "source must be one of" in error.data["line"]


def test_params_and_tags_are_the_runs(api, client, owner, run) -> None:
    events = [
        {"type": "param", "time": 1.0, "key": "lr", "value": "0.1", "source": "mlflow"},
        {"type": "tag", "time": 1.0, "key": "team", "value": "vision", "source": "mlflow"},
        {"type": "tag", "time": 1.0, "key": "tmp", "value": "x", "source": "mlflow"},
        {"type": "tag", "time": 2.0, "key": "tmp", "value": "", "deleted": True},
    ]
    store_events(run, events, timezone.now())
    assert logged_parameters(run) == ({"lr": "0.1"}, {"team": "vision"})
    detail = api.get(f"/api/v1/runs/{run.pk}/").json()
    assert (detail["params"], detail["logged_tags"]) == ({"lr": "0.1"}, {"team": "vision"})
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-parameters"' in page
    assert "vision" in page
