"""The run list answers at a glance: each row's result, a text search, filters in the URL."""

from __future__ import annotations

import pytest
from django.test import Client

from npulab.runs.listing import MAX_QUERY
from npulab.runs.metric_stats import lower_is_better, metric_stats
from npulab.runs.models import Run
from npulab.runs.rows import RowResult, row_results
from npulab.runs.services import do_ingest_events, do_submit_run
from npulab.runs.templatetags.run_tags import sparkline
from tests.runs.test_attempts import crash, started

pytestmark = pytest.mark.django_db


def row_result(run: Run) -> RowResult:
    """One run's row, read as a page of one."""
    return row_results([run])[run.pk]


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def _losses(host, run: Run, values: list[float]) -> None:
    events = [
        {"type": "metric", "time": float(step), "key": "loss", "step": step, "value": value}
        for step, value in enumerate(values)
    ]
    do_ingest_events(host, run.pk, run.attempt, 0, 100 * len(values), events)


def test_a_running_training_run_shows_its_last_loss_steps_and_a_sparkline(owner, cpu_host) -> None:
    run = started(owner, cpu_host, max_steps=500)
    _losses(cpu_host, run, [2.3, 1.7, float("nan"), 0.9, 0.61])

    result = row_result(Run.objects.get(pk=run.pk))

    assert result.numbers == [("loss", "0.61")]
    assert result.steps == "step 5 / 500"
    assert result.spark_key == "loss"
    assert result.spark == [2.3, 1.7, None, 0.9, 0.61]


def test_a_script_that_only_prints_its_loss_has_it_in_its_row(browser, owner, cpu_host) -> None:
    # An unmodified script: its only series is the one its printed lines gave (issue 27).
    run = started(owner, cpu_host, max_steps=100)
    printed = [
        {"type": "metric", "time": 1.0 + step, "key": "loss", "step": step, "value": value,
         "source": "stdout"}
        for step, value in enumerate([2.5, 1.5, 0.75])
    ]  # fmt: skip
    do_ingest_events(cpu_host, run.pk, run.attempt, 0, 300, printed)

    result = row_result(Run.objects.get(pk=run.pk))

    assert result.numbers == [("loss (stdout)", "0.75")]
    assert result.spark == [2.5, 1.5, 0.75]
    assert result.steps == "step 3 / 100"
    row = browser.get("/runs/").content.decode().split(f'data-run="{run.pk}"', 1)[1]
    assert 'data-headline="loss (stdout)"' in row.split("</tr>", 1)[0]


def test_a_page_of_rows_reads_its_series_together(
    owner, cpu_host, django_assert_max_num_queries
) -> None:
    runs = []
    for losses in ([3.0, 2.0], [1.0, 0.5, 0.25], [9.0]):
        run = started(owner, cpu_host, max_steps=10, max_restarts=0)
        _losses(cpu_host, run, losses)
        runs.append(crash(cpu_host, run))  # the host's device is free for the next
    # Two reads for every run's series, then one read of points per run with curves.
    with django_assert_max_num_queries(2 + len(runs)):
        results = row_results(runs)
    assert [results[run.pk].numbers for run in runs] == [
        [("loss", "2")],
        [("loss", "0.25")],
        [("loss", "9")],
    ]


def test_the_sparkline_leaves_a_gap_where_a_value_is_missing() -> None:
    svg = sparkline([3.0, 2.0, None, 1.0, 0.5])
    assert svg.count("<polyline") == 2
    assert 'role="img"' in svg
    assert sparkline([1.0]) == ""  # one point is no line


def test_a_failed_run_says_why_in_its_row(browser, owner, cpu_host) -> None:
    run = crash(
        cpu_host,
        started(owner, cpu_host, max_restarts=0),
        reason="NPU out of memory. Tried to allocate 2.00 GiB\nmore detail",
    )

    result = row_result(Run.objects.get(pk=run.pk))
    page = browser.get("/runs/").content.decode()

    assert result.failure_line == "NPU out of memory. Tried to allocate 2.00 GiB"
    row = page.split(f'data-run="{run.pk}"', 1)[1].split("</tr>", 1)[0]
    assert f'data-failure="{result.failure}"' in row
    assert "Tried to allocate 2.00 GiB" in row


def test_search_finds_runs_by_name_entry_args_and_tags_and_keeps_filters_in_the_url(
    browser, owner, cpu_host
) -> None:
    base = {"kind": "training", "device_type": "cpu", "entry": "builtin:cnn"}
    by_name = do_submit_run(owner, {**base, "name": "ResNet sweep"})
    by_entry = do_submit_run(owner, {**base, "entry": "scripts/resnet_train.py"})
    by_args = do_submit_run(owner, {**base, "args": ["--arch", "RESNET50"]})
    by_tag = do_submit_run(owner, {**base, "tags": ["resnet-nightly"]})
    secret = do_submit_run(owner, {**base, "env": {"HINT": "resnet"}})
    other = do_submit_run(owner, {**base, "name": "bert"})

    page = browser.get("/runs/", {"q": "resnet", "kind": "training"}).content.decode()

    for run in (by_name, by_entry, by_args, by_tag):
        assert f'data-run="{run.pk}"' in page
    # Env values are not searched: a search must not reveal what a spec's env holds.
    assert f'data-run="{secret.pk}"' not in page
    assert f'data-run="{other.pk}"' not in page
    assert 'name="q" value="resnet"' in page


def test_a_search_too_long_is_cut_not_an_error(browser, owner) -> None:
    response = browser.get("/runs/", {"q": "x" * (MAX_QUERY * 10)})
    assert response.status_code == 200
    assert f'value="{"x" * MAX_QUERY}"' in response.content.decode()


def test_a_training_run_page_leads_with_its_curves_and_their_last_and_best(
    browser, owner, cpu_host
) -> None:
    run = started(owner, cpu_host, max_steps=500)
    _losses(cpu_host, run, [2.3, 0.4, 0.9])

    page = browser.get(f"/runs/{run.pk}/").content.decode()
    stats = {stat.key: stat for stat in metric_stats(Run.objects.get(pk=run.pk))}

    assert (stats["loss"].last, stats["loss"].best, stats["loss"].step) == (0.9, 0.4, 2)
    assert page.index('id="run-headline"') < page.index('<div class="card-header">Run</div>')
    assert page.count('id="metric-charts"') == 1  # the page adds no second card below
    row = page.split('data-metric="loss"', 1)[1].split("</tr>", 1)[0]
    assert ">0.9<" in row
    assert ">0.4<" in row


def test_best_is_the_highest_for_a_metric_where_more_is_better() -> None:
    assert lower_is_better("train/loss")
    assert lower_is_better("val_ppl")
    assert not lower_is_better("eval/accuracy")
    assert not lower_is_better("samples_per_s")
    assert lower_is_better("step_time_s")
    assert lower_is_better("val_wer")


def test_a_run_without_a_headline_keeps_its_metrics_card_under_the_facts(
    browser, owner, cpu_host
) -> None:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    page = browser.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-headline"' not in page
    assert page.index('<div class="card-header">Run</div>') < page.index('id="metrics-card"')


def test_a_diagnosed_run_shows_its_category_and_root_cause_line(owner, cpu_host) -> None:
    run = crash(cpu_host, started(owner, cpu_host, max_restarts=0), reason="wrapper 507899")
    Run.objects.filter(pk=run.pk).update(
        diagnosis={"category": "oom", "line": "EL0004: alloc failed", "blame": "user-code"}
    )

    result = row_result(Run.objects.get(pk=run.pk))

    assert (result.failure, result.failure_line) == ("oom", "EL0004: alloc failed")
