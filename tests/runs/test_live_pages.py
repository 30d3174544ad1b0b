"""The run page while a run is alive: progress, no stale parts, the full log, cancel's warning."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from npulab.checkpoints.models import Checkpoint
from npulab.runs.events import store_events
from npulab.runs.models import Run, RunEvent
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.selectors import LOG_PAGE_LINES, cancel_warning, metric_keys, progress
from npulab.runs.services import do_claim_run, do_ingest_events, do_submit_run
from tests.runs.test_attempts import checkpoint_event, crash, started

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


class Feed:
    """A host worker's forwarder for one run attempt: batches of events in offset order."""

    def __init__(self, host, run: Run) -> None:
        self.host, self.run, self.offset = host, run, 0

    def send(self, events: list[dict]) -> None:
        end = self.offset + 100 * len(events)
        do_ingest_events(self.host, self.run.pk, self.run.attempt, self.offset, end, events)
        self.offset = end


def metric(key: str, step: int, value: float, time: float) -> dict:
    return {"type": "metric", "time": time, "key": key, "step": step, "value": value}


def training_at_step_100(owner, host) -> Run:
    """A training run of 1,000 steps that logged steps 0-99 at two steps a second."""
    run = started(owner, host, max_steps=1000, max_restarts=0)
    Feed(host, run).send(
        [metric("loss", step, 2.0 - step / 100, 1_000.0 + step / 2) for step in range(100)]
        + [metric("lr", step, 0.001, 1_000.0 + step / 2) for step in range(100)]
    )
    return run


# -- progress ------------------------------------------------------------------------------


def test_training_progress_is_step_n_of_max_steps_with_throughput_and_eta(
    browser, owner, cpu_host
) -> None:
    run = training_at_step_100(owner, cpu_host)
    found = progress(run)
    assert (found.step, found.total_steps, found.percent) == (100, 1000, 10)
    assert found.steps_per_s == pytest.approx(2.0)
    assert found.eta_s == pytest.approx(450.0)  # 900 steps left at 2 a second

    page = browser.get(f"/runs/{run.pk}/").content.decode()
    text = re.sub(r"<[^>]+>", "", page)
    assert "Step 100 of 1000 · 2.0 steps/s · ETA 7m 30s" in text
    assert 'aria-valuenow="10"' in page


def test_progress_in_the_api(api, owner, cpu_host) -> None:
    run = training_at_step_100(owner, cpu_host)
    body = api.get(f"/api/v1/runs/{run.pk}/").json()
    assert body["progress"]["step"] == 100
    assert body["progress"]["total_steps"] == 1000
    assert body["progress"]["steps_per_s"] == pytest.approx(2.0)
    assert body["progress"]["eta_s"] == pytest.approx(450.0)
    assert body["progress"]["running_step"] is None
    listed = api.get("/api/v1/runs/").json()["results"]
    assert [item["progress"]["step"] for item in listed if item["id"] == run.pk] == [100]


def test_an_ended_run_keeps_its_steps_but_has_no_speed_or_eta(api, owner, cpu_host) -> None:
    run = crash(cpu_host, training_at_step_100(owner, cpu_host))
    body = api.get(f"/api/v1/runs/{run.pk}/").json()["progress"]
    assert (body["step"], body["steps_per_s"], body["eta_s"]) == (100, None, None)


def test_a_queued_run_has_no_progress(api, owner, cpu_host) -> None:
    run = do_submit_run(owner, {"kind": "training", "device_type": "cpu", "entry": "builtin:cnn"})
    assert api.get(f"/api/v1/runs/{run.pk}/").json()["progress"] is None


def smoke_running(owner, host) -> Run:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    place_queued_runs()
    run.refresh_from_db()
    return do_claim_run(host, run.pk, run.attempt)


def test_a_smoke_run_shows_the_step_running_now_and_for_how_long(
    browser, api, owner, cpu_host
) -> None:
    run = smoke_running(owner, cpu_host)
    finished = timezone.now() - timedelta(seconds=30)
    step = {
        "type": "step",
        "time": finished.timestamp(),
        "name": "device",
        "status": "pass",
        "seconds": 0.4,
    }
    Feed(cpu_host, run).send([step])
    found = progress(run, now=finished + timedelta(seconds=12))
    assert (found.running_step, found.finished_steps) == (2, ("device",))
    assert found.running_s == pytest.approx(12.0)

    page = re.sub(r"<[^>]+>", "", browser.get(f"/runs/{run.pk}/").content.decode())
    assert re.search(r"Step 2 running for \d+ s, after device", page)
    body = api.get(f"/api/v1/runs/{run.pk}/").json()["progress"]
    assert (body["running_step"], body["finished_steps"]) == (2, ["device"])
    assert body["running_s"] >= 30


def step_started(name: str, at) -> dict:
    return {"type": "step_started", "time": at.timestamp(), "name": name}


def test_a_smoke_run_names_the_step_that_began_and_times_it_from_its_start(
    browser, api, owner, cpu_host
) -> None:
    run = smoke_running(owner, cpu_host)
    began = timezone.now() - timedelta(seconds=40)
    feed = Feed(cpu_host, run)
    feed.send(
        [
            step_started("device", began),
            {"type": "step", "time": began.timestamp() + 1, "name": "device", "status": "pass"},
        ]
    )
    assert progress(run).running_step_name is None  # between steps: nothing named runs
    feed.send([step_started("matmul", began + timedelta(seconds=2))])

    found = progress(run, now=began + timedelta(seconds=14))
    assert (found.running_step, found.running_step_name) == (2, "matmul")
    assert found.running_s == pytest.approx(12.0)
    assert found.finished_steps == ("device",)
    # The news that a step began is a field of the attempt, not a row of the run's events.
    assert not RunEvent.objects.filter(run=run, type="step_started").exists()

    page = re.sub(r"<[^>]+>", "", browser.get(f"/runs/{run.pk}/").content.decode())
    assert re.search(r"Running: matmul for \d+ s, after device", page), page
    body = api.get(f"/api/v1/runs/{run.pk}/").json()["progress"]
    assert (body["running_step"], body["running_step_name"]) == (2, "matmul")
    assert body["running_s"] >= 38

    # The step's end clears it; the next one's start names the next.
    feed.send(
        [{"type": "step", "time": began.timestamp() + 20, "name": "matmul", "status": "pass"}]
    )
    assert progress(run).running_step_name is None
    feed.send([step_started("train", began + timedelta(seconds=21))])
    assert api.get(f"/api/v1/runs/{run.pk}/").json()["progress"]["running_step_name"] == "train"


def test_a_step_started_event_without_a_name_is_kept_as_a_visible_error(owner, cpu_host) -> None:
    run = smoke_running(owner, cpu_host)
    Feed(cpu_host, run).send([{"type": "step_started", "time": 1.0, "name": 7}])
    line = RunEvent.objects.get(run=run, type="log").data["line"]
    assert line.startswith("malformed event (step_started.name must be string)")
    assert progress(run).running_step_name is None


# -- nothing stale or contradictory ------------------------------------------------------------


def test_charts_and_the_metric_list_have_one_order_losses_first(browser, owner, cpu_host) -> None:
    run = started(owner, cpu_host)
    Feed(cpu_host, run).send(
        [metric(key, 0, 1.0, 1.0) for key in ("lr", "train/loss", "accuracy", "loss", "val/loss")]
    )
    order = ["loss", "train/loss", "val/loss", "accuracy", "lr"]
    assert metric_keys(run) == order
    page = browser.get(f"/runs/{run.pk}/").content.decode()
    listed = re.search(r'id="metric-list" data-keys="([^"]*)"', page).group(1)
    assert json.loads(listed.replace("&quot;", '"')) == order
    assert "metrics: " + ", ".join(order) in page
    # With metrics to draw, the charts' placeholder starts hidden (charts.js keeps it so).
    assert 'id="no-metrics" hidden' in page


def test_no_metrics_says_yet_only_while_the_run_is_alive(browser, owner, cpu_host) -> None:
    run = started(owner, cpu_host, max_restarts=0)
    page = browser.get(f"/runs/{run.pk}/").content.decode()
    assert re.search(
        r'<div class="small text-muted" id="no-metrics"[^>]*>No metrics yet\.</div>', page
    )
    # What charts.js says instead once the run has ended under the open page.
    assert 'data-ended="No metrics were logged."' in page
    crash(cpu_host, run)
    page = browser.get(f"/runs/{run.pk}/").content.decode()
    assert "No metrics were logged." in page
    assert "No metrics yet." not in page


def test_a_refresh_that_shows_a_new_status_drops_the_flashes_of_the_old_one(
    browser, owner, cpu_host
) -> None:
    run = started(owner, cpu_host)
    # The page was loaded while queued ("Run #N queued."); the run runs now.
    moved_on = browser.get(f"/runs/{run.pk}/", {"shown": "queued"}, **HTMX).content.decode()
    assert '<div hx-swap-oob="delete:main > .alert"></div>' in moved_on
    assert f'hx-get="/runs/{run.pk}/?shown=running"' in moved_on
    same = browser.get(f"/runs/{run.pk}/", {"shown": "running"}, **HTMX).content.decode()
    assert "hx-swap-oob" not in same


# -- cancel ------------------------------------------------------------------------------------


def test_cancel_asks_first_and_says_the_time_since_the_checkpoint_is_lost(
    browser, owner, cpu_host
) -> None:
    run = started(owner, cpu_host)
    Feed(cpu_host, run).send([checkpoint_event(49, b"weights")])
    saved = Checkpoint.objects.get(run=run).created
    assert cancel_warning(run, now=saved + timedelta(seconds=125)) == (
        f"Cancel run #{run.pk}? The 2 min 5 s of work since the checkpoint of step 49 "
        "will be lost; a restart goes on from that checkpoint."
    )
    page = browser.get(f"/runs/{run.pk}/").content.decode()
    assert f'hx-post="/runs/{run.pk}/cancel/"' in page
    assert re.search(
        rf'hx-confirm="Cancel run #{run.pk}\? The \d+ s of work since the checkpoint of step 49 '
        r'will be lost; a restart goes on from that checkpoint."',
        page,
    )
    assert "<script" not in page.split('id="run-live"')[1]

    response = browser.post(f"/runs/{run.pk}/cancel/", **HTMX)
    assert response.headers["HX-Redirect"] == f"/runs/{run.pk}/"
    assert Run.objects.get(pk=run.pk).cancel_requested


def test_without_a_checkpoint_cancel_loses_the_time_since_the_attempt_started(
    owner, cpu_host
) -> None:
    run = smoke_running(owner, cpu_host)
    began = run.attempts.get().started_at
    assert cancel_warning(run, now=began + timedelta(minutes=3, seconds=2)) == (
        f"Cancel run #{run.pk}? Its 3 min 2 s of work will be lost: a restart starts it over."
    )
    queued = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    assert (
        cancel_warning(queued) == f"Cancel run #{queued.pk}? It has not started: nothing is lost."
    )


# -- the full log ------------------------------------------------------------------------------

FIRST_ATTEMPT_LINES = 2 * LOG_PAGE_LINES + 203


@pytest.fixture
def logged(owner, cpu_host) -> Run:
    """A run with two attempts: 1,203 lines in the first, three in the second."""
    run = started(owner, cpu_host)

    def lines(count: int, stream: str = "stdout") -> list[tuple[str, str]]:
        return [(stream, f"step {n:05d} loss {1 / (n + 1):.4f}") for n in range(count)]

    log(run, lines(FIRST_ATTEMPT_LINES))
    run = crash(cpu_host, run)
    place_queued_runs()
    run = do_claim_run(cpu_host, run.pk, 2)
    log(run, lines(3, "stderr"))
    return run


def log(run: Run, lines: list[tuple[str, str]]) -> None:
    """Store (stream, line) pairs as the run's current attempt's log, as ingestion does."""
    stamp = timezone.now().timestamp()
    events = [{"type": "log", "time": stamp, "stream": s, "line": text} for s, text in lines]
    store_events(run, events, timezone.now())


def lines_on(page: str) -> list[int]:
    return [int(n) for n in re.findall(r'<div class="\w+" id="L(\d+)">', page)]


def test_the_log_view_pages_through_the_whole_log_of_an_attempt(browser, logged) -> None:
    first = browser.get(f"/runs/{logged.pk}/log/", {"attempt": 1}).content.decode()
    assert lines_on(first) == list(range(1, LOG_PAGE_LINES + 1))
    assert "Page 1 of 3" in first
    assert "step 00000 loss" in first
    last = browser.get(f"/runs/{logged.pk}/log/", {"attempt": 1, "page": 3}).content.decode()
    assert lines_on(last) == list(range(2 * LOG_PAGE_LINES + 1, FIRST_ATTEMPT_LINES + 1))
    assert "step 01202 loss" in last
    # Without an attempt: the current one.
    current = browser.get(f"/runs/{logged.pk}/log/").content.decode()
    assert lines_on(current) == [1, 2, 3]
    assert 'href="?attempt=1"' in current
    assert "Attempt 2: 3 lines" in current


def test_the_log_search_finds_lines_and_links_to_where_they_are(browser, logged) -> None:
    page = browser.get(f"/runs/{logged.pk}/log/", {"attempt": 1, "q": "STEP 01100"})
    html = page.content.decode()
    assert lines_on(html) == [1101]
    assert 'href="?attempt=1&amp;page=3#L1101"' in html
    assert "1 line of attempt 1 contains “STEP 01100”" in html
    # Wildcards of SQL are plain characters in a search.
    none = browser.get(f"/runs/{logged.pk}/log/", {"attempt": 1, "q": "step%loss"})
    assert lines_on(none.content.decode()) == []


def test_the_log_downloads_as_text(browser, logged) -> None:
    response = browser.get(f"/runs/{logged.pk}/log.txt")
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="run-{logged.pk}.log"'
    text = b"".join(response.streaming_content).decode().splitlines()
    assert len(text) == FIRST_ATTEMPT_LINES + 3 + 2
    assert text[0] == "# attempt 1"
    assert text[1].endswith(" stdout step 00000 loss 1.0000")
    assert text[FIRST_ATTEMPT_LINES + 1] == "# attempt 2"
    assert text[-1].endswith(" stderr step 00002 loss 0.3333")

    one = browser.get(f"/runs/{logged.pk}/log.txt", {"attempt": 2, "q": "00001"})
    assert one["Content-Disposition"] == f'attachment; filename="run-{logged.pk}-attempt-2.log"'
    assert len(b"".join(one.streaming_content).splitlines()) == 1


def test_a_bad_attempt_or_search_is_a_400_that_says_why(browser, logged) -> None:
    page = browser.get(f"/runs/{logged.pk}/log/", {"attempt": "9"})
    assert page.status_code == 400
    assert "attempt: no attempt &#x27;9&#x27; of this run (it has 1, 2)" in page.content.decode()
    text = browser.get(f"/runs/{logged.pk}/log.txt", {"q": "x" * 201})
    assert text.status_code == 400
    assert text.content.decode() == "q: a search of at most 200 characters\n"


def test_the_run_page_links_the_full_log(browser, logged) -> None:
    page = browser.get(f"/runs/{logged.pk}/").content.decode()
    assert f'id="full-log-link" href="/runs/{logged.pk}/log/"' in page
    assert f'href="/runs/{logged.pk}/log.txt"' in page


def test_the_log_filters_by_stream_and_keeps_line_numbers(browser, logged) -> None:
    log(logged, [("runner", "the runner speaks")])
    page = browser.get(f"/runs/{logged.pk}/log/", {"attempt": 2, "stream": "runner"})
    html = page.content.decode()
    assert lines_on(html) == [4]
    assert "the runner speaks" in html
    assert "on runner" in html
    bad = browser.get(f"/runs/{logged.pk}/log/", {"attempt": 2, "stream": "../etc"})
    assert bad.status_code == 400
    assert "stream: one of stdout, stderr, runner" in bad.content.decode()


def test_a_live_log_follows_its_newest_page_and_marks_errors_and_matches(browser, logged) -> None:
    log(logged, [("stderr", "\x1b[1;31mred and bold\x1b[0m plain <b>not markup</b>")])
    log(logged, [("stderr", "EL0004: alloc failed")])
    html = browser.get(f"/runs/{logged.pk}/log/").content.decode()
    assert 'data-following="1"' in html
    assert '<span class="ansi-bold ansi-fg-red">red and bold</span>' in html
    assert "&lt;b&gt;not markup&lt;/b&gt;" in html
    assert 'id="first-error" href="?attempt=2&amp;page=1#L5"' in html
    found = browser.get(f"/runs/{logged.pk}/log/", {"attempt": 2, "q": "ALLOC"}).content.decode()
    assert "<mark>alloc</mark> failed" in found
    assert 'data-following="1"' not in found  # a search is not a live view
    fragment = browser.get(
        f"/runs/{logged.pk}/log/", {"attempt": 2, "page": "last"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert fragment.lstrip().startswith('<div class="card" id="log-card"')


def test_the_log_links_the_diagnosis_evidence(browser, logged) -> None:
    Run.objects.filter(pk=logged.pk).update(
        diagnosis={
            "category": "oom",
            "evidence": [{"file": "stdout", "line_no": 2, "text": "step 00001"}],
        }
    )
    html = browser.get(f"/runs/{logged.pk}/log/", {"attempt": 2}).content.decode()
    assert (
        'class="btn btn-sm btn-outline-warning evidence-link" href="?attempt=2&amp;q=step%2000001"'
        in html
    )
