"""The full-log page of a long log: numbered lines read by range, the first error noted as the
lines come, and searches that scan a stretch at a time (issue 34: a 1 GB log stays
responsive; bench/log_page.py measures it)."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone

from npulab.runs import selectors
from npulab.runs.events import store_events
from npulab.runs.models import Run, RunAttempt, RunEvent
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.selectors import LOG_PAGE_LINES
from npulab.runs.services import do_claim_run, do_submit_run
from tests.runs.test_attempts import TRAINING, crash, started
from tests.runs.test_live_pages import Feed

pytestmark = pytest.mark.django_db
# Four pages and a bit, in batches that end mid-page.
LINES = 4 * LOG_PAGE_LINES + 37
BATCH = 333
DASH = "\u2013"  # the summary's en dash


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def text(n: int) -> str:
    return f"step {n:05d} loss {1 / (n + 1):.4f}"


def logged_run(owner, host, error_at: int | None = None) -> Run:
    """A running run with LINES lines, sent in batches among step events, while another run
    logs too: the ids of one attempt's lines are not contiguous."""
    run = started(owner, host)
    other = do_submit_run(owner, TRAINING)
    feed = Feed(host, run)
    now = timezone.now()
    for first in range(0, LINES, BATCH):
        events = []
        for n in range(first, min(LINES, first + BATCH)):
            line = "RuntimeError: EL0004 allocation failed" if n + 1 == error_at else text(n)
            events.append({"type": "log", "time": 1.0, "stream": "stdout", "line": line})
            if n % 100 == 0:
                events.append({"type": "step", "time": 1.0, "name": f"s{n}", "status": "pass"})
        feed.send(events)
        store_events(other, [{"type": "log", "time": 1.0, "line": "the other run"}], now)
    return run


def lines_on(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<div class="\w+" id="L(\d+)">', html)]


def texts_on(html: str) -> list[str]:
    return re.findall(r"step \d{5} loss [0-9.]+", html)


def test_lines_are_numbered_in_their_attempt_and_pages_are_ranges_of_them(
    browser, owner, cpu_host
) -> None:
    run = logged_run(owner, cpu_host)
    numbers = RunEvent.objects.filter(run=run, type="log").order_by("id")
    assert list(numbers.values_list("line_no", flat=True)) == list(range(1, LINES + 1))
    assert not RunEvent.objects.filter(run=run, type="step", line_no__isnull=False).exists()

    page = browser.get(f"/runs/{run.pk}/log/", {"attempt": 1, "page": 3}).content.decode()
    assert lines_on(page) == list(range(2 * LOG_PAGE_LINES + 1, 3 * LOG_PAGE_LINES + 1))
    assert texts_on(page) == [text(n - 1) for n in lines_on(page)]
    assert f"Attempt 1: {LINES} lines, lines 1001{DASH}1500" in page
    assert "Page 3 of 5" in page
    # The live view opens on the newest page, and follows it.
    live = browser.get(f"/runs/{run.pk}/log/").content.decode()
    assert lines_on(live) == list(range(4 * LOG_PAGE_LINES + 1, LINES + 1))
    assert 'data-following="1"' in live
    # The next attempt's lines are numbered from 1 again.
    run = crash(cpu_host, run)
    place_queued_runs()
    run = do_claim_run(cpu_host, run.pk, 2)
    Feed(cpu_host, run).send([{"type": "log", "time": 1.0, "stream": "stderr", "line": "again"}])
    second = browser.get(f"/runs/{run.pk}/log/", {"attempt": 2}).content.decode()
    assert lines_on(second) == [1]
    assert "Attempt 2: 1 line" in second


def test_the_first_error_is_noted_as_the_lines_come_and_kept(browser, owner, cpu_host) -> None:
    error_at = 2 * LOG_PAGE_LINES + 123
    run = logged_run(owner, cpu_host, error_at=error_at)
    assert RunAttempt.objects.get(run=run, number=1).first_error_line == error_at
    # A later error is not the first.
    store_events(run, [{"type": "log", "time": 1.0, "line": "[ERROR] later"}], timezone.now())
    assert RunAttempt.objects.get(run=run, number=1).first_error_line == error_at
    html = browser.get(f"/runs/{run.pk}/log/").content.decode()
    assert f'id="first-error" href="?attempt=1&amp;page=3#L{error_at}"' in html
    jumped = browser.get(f"/runs/{run.pk}/log/", {"attempt": 1, "page": 3}).content.decode()
    assert f'id="L{error_at}"' in jumped
    assert "EL0004 allocation failed" in jumped


def test_a_log_without_errors_has_no_first_error_link(browser, owner, cpu_host) -> None:
    run = logged_run(owner, cpu_host)
    assert RunAttempt.objects.get(run=run, number=1).first_error_line is None
    assert 'id="first-error"' not in browser.get(f"/runs/{run.pk}/log/").content.decode()


def test_a_search_with_more_hits_than_a_page_goes_on_from_its_last_hit(
    browser, owner, cpu_host
) -> None:
    run = logged_run(owner, cpu_host)
    url = f"/runs/{run.pk}/log/"
    first = browser.get(url, {"attempt": 1, "q": "LOSS", "after": 0}).content.decode()
    assert lines_on(first) == list(range(1, LOG_PAGE_LINES + 1))
    assert f"500 lines contain “LOSS” in lines 1{DASH}500 of attempt 1's {LINES}" in first
    assert 'href="?attempt=1&amp;q=LOSS&amp;after=500">Next</a>' in first
    following = browser.get(url, {"attempt": 1, "q": "LOSS", "after": 500}).content.decode()
    assert lines_on(following) == list(range(501, 1001))
    assert 'href="?attempt=1&amp;q=LOSS&amp;before=501">Previous</a>' in following
    assert 'href="?attempt=1&amp;q=LOSS&amp;after=0">First</a>' in following
    assert f'href="?attempt=1&amp;q=LOSS&amp;before={LINES + 1}">Last</a>' in following
    # Hits link to their page of the whole log.
    assert 'href="?attempt=1&amp;page=2#L501"' in following
    back = browser.get(url, {"attempt": 1, "q": "LOSS", "before": 501}).content.decode()
    assert lines_on(back) == list(range(1, 501))
    # A live run's search, like its log, opens on the newest.
    newest = list(range(LINES - LOG_PAGE_LINES + 1, LINES + 1))
    assert lines_on(browser.get(url, {"attempt": 1, "q": "LOSS"}).content.decode()) == newest
    last = browser.get(url, {"attempt": 1, "q": "LOSS", "before": LINES + 1}).content.decode()
    assert lines_on(last) == newest


def test_a_long_search_stops_after_a_stretch_and_says_where_to_go_on(
    browser, owner, cpu_host, monkeypatch
) -> None:
    run = logged_run(owner, cpu_host)
    # One window of 600 lines per request, as a log of millions of lines is searched.
    monkeypatch.setattr(selectors, "LOG_SCAN_LINES", 600)
    monkeypatch.setattr(selectors, "LOG_SCAN_SECONDS", 0)
    url = f"/runs/{run.pk}/log/"
    first = browser.get(url, {"attempt": 1, "q": "step 017", "after": 0}).content.decode()
    assert lines_on(first) == []
    assert f"0 lines contain “step 017” in lines 1{DASH}600 of attempt 1's {LINES}" in first
    assert "this search stopped at line 600" in first
    assert 'href="?attempt=1&amp;q=step+017&amp;after=600">Search on from line 601</a>' in first
    on = browser.get(url, {"attempt": 1, "q": "step 017", "after": 600}).content.decode()
    assert f"in lines 601{DASH}1200" in on
    on = browser.get(url, {"attempt": 1, "q": "step 017", "after": 1200}).content.decode()
    assert lines_on(on) == list(range(1701, 1801))
    assert f"in lines 1201{DASH}1800" in on
    # From the newest (a live run's search opens there), the search goes back.
    newest = browser.get(url, {"attempt": 1, "q": "step 000"}).content.decode()
    assert f"0 lines contain “step 000” in lines {LINES - 599}{DASH}{LINES}" in newest
    back = LINES - 599
    link = f'href="?attempt=1&amp;q=step+000&amp;before={back}">Search back from line {back - 1}'
    assert link in newest
    # A stream is narrowed the same way; without a limit it is read whole.
    stream = browser.get(url, {"attempt": 1, "stream": "stdout", "after": 0}).content.decode()
    assert f"in lines 1{DASH}500" in stream
    monkeypatch.setattr(selectors, "LOG_SCAN_LINES", 100_000)
    none = browser.get(url, {"attempt": 1, "stream": "stderr"}).content.decode()
    assert "Attempt 1: 0 lines on stderr" in none
    assert "this search stopped" not in none


def test_a_bad_line_to_go_on_from_is_a_400(browser, owner, cpu_host) -> None:
    run = started(owner, cpu_host)
    page = browser.get(f"/runs/{run.pk}/log/", {"q": "x", "after": "-1"})
    assert page.status_code == 400
    assert "after: a line number" in page.content.decode()


def test_the_download_reads_the_log_a_window_at_a_time_in_order(
    browser, owner, cpu_host, monkeypatch
) -> None:
    run = logged_run(owner, cpu_host)
    monkeypatch.setattr(selectors, "LOG_TEXT_WINDOW", 300)
    response = browser.get(f"/runs/{run.pk}/log.txt", {"attempt": 1})
    rows = b"".join(response.streaming_content).decode().splitlines()
    assert [row.split(" stdout ")[1] for row in rows] == [text(n) for n in range(LINES)]
    found = browser.get(f"/runs/{run.pk}/log.txt", {"q": "step 0170"})
    assert b"".join(found.streaming_content).decode().splitlines()[0] == "# attempt 1"
