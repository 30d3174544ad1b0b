"""The profile timeline in headless Chromium: a real torch.profiler trace indexed into a
profile of the test database, opened with no internet, zoomed, panned, an event clicked
and its details read, an event found by name and jumped to."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings as django_settings
from django.test import Client

from npulab.profiles import timeline
from npulab.profiles.timeline.store import local_index
from tests.factories import RunFactory, UserFactory
from tests.profiles.timeline.profiles import record_torch_trace, stored_profile, use_local_stores

pytestmark = [pytest.mark.browser]

LOCAL = {"127.0.0.1", "localhost"}
# The events drawn are those of the window in view (not the one before the last change).
CURRENT = """() => {
  const t = window.npulabTimeline, drawn = t && t.loaded(), v = t && t.view();
  return drawn !== null && drawn !== undefined && drawn.start === v.start && drawn.end === v.end;
}"""


@pytest.fixture
def profile(settings: Any, tmp_path, transactional_db) -> Any:
    use_local_stores(settings, tmp_path)
    trace = record_torch_trace(tmp_path / "trace.json")
    return stored_profile(RunFactory(name="profiled"), trace)


@pytest.fixture
def page(browser, live_server) -> Iterator[tuple[Any, list[str], list[dict]]]:
    """A signed-in page that can reach only this machine; what it was refused; the windows
    it asked for."""
    client = Client()
    client.force_login(UserFactory(username="viewer"))
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_cookies(
        [
            {
                "name": django_settings.SESSION_COOKIE_NAME,
                "value": client.cookies[django_settings.SESSION_COOKIE_NAME].value,
                "url": live_server.url,
            }
        ]
    )
    refused: list[str] = []
    windows: list[dict] = []

    def only_local(route) -> None:
        url = urlsplit(route.request.url)
        if url.hostname in LOCAL:
            if url.path.endswith("/timeline/window/"):
                windows.append({k: float(v[0]) for k, v in parse_qs(url.query).items()})
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    context.route("**/*", only_local)
    yield context.new_page(), refused, windows
    context.close()


def view(page: Any) -> dict[str, float]:
    return page.evaluate("window.npulabTimeline.view()")


def test_the_timeline_opens_zooms_pans_and_shows_a_clicked_event(
    live_server, profile, page, tmp_path
) -> None:
    page, refused, windows = page
    # Opened where a summary's link points: the second step.
    step = next(
        match for match in timeline.search(local_index(profile), "ProfilerStep#2")["matches"]
    )
    page.goto(
        f"{live_server.url}/profiles/{profile.pk}/timeline/?at={step['start']}&span={step['dur']}"
    )
    page.wait_for_function(CURRENT)
    assert page.evaluate("performance.getEntriesByName('timeline-first-paint').length") == 1
    opened = view(page)
    assert opened["start"] < step["start"] < step["start"] + step["dur"] < opened["end"]
    # Timestamps near 5e12 µs keep about a nanosecond once subtracted.
    assert opened["end"] - opened["start"] == pytest.approx(step["dur"] * 1.5, abs=0.01)
    # The first window was that view, asked at the canvas's width (less the lane labels).
    first = windows[0]
    assert (first["start"], first["end"]) == (opened["start"], opened["end"])
    canvas_width = page.evaluate("document.getElementById('timeline-canvas').clientWidth")
    assert first["width"] == canvas_width - 220

    # Zoom in twice with the button, once with the wheel over the canvas's middle.
    page.click("#zoom-in")
    page.click("#zoom-in")
    canvas = page.locator("#timeline-canvas").bounding_box()
    middle = canvas["x"] + 220 + (canvas["width"] - 220) / 2
    page.mouse.move(middle, canvas["y"] + 60)
    page.mouse.wheel(0, -100)
    span = opened["end"] - opened["start"]
    page.wait_for_function(
        "span => { const v = window.npulabTimeline.view(); return v.end - v.start < span; }",
        arg=span / 1.5**3 * 1.01,
    )
    page.wait_for_function(CURRENT)
    zoomed = view(page)
    # The window fetched for the zoomed view is the zoomed view, not the whole trace.
    last = windows[-1]
    assert (last["start"], last["end"]) == (zoomed["start"], zoomed["end"])

    # Drag to pan: the span stays, the start moves.
    page.mouse.move(middle, canvas["y"] + 60)
    page.mouse.down()
    page.mouse.move(middle - 100, canvas["y"] + 60, steps=5)
    page.mouse.up()
    panned = view(page)
    assert panned["start"] > zoomed["start"]
    assert panned["end"] - panned["start"] == pytest.approx(
        zoomed["end"] - zoomed["start"], abs=0.01
    )
    page.wait_for_function(CURRENT)

    # Click the widest op drawn (inside a step, so one row down at least): its details.
    drawn = page.evaluate("window.npulabTimeline.visibleEvents()")
    target = max((e for e in drawn if e["name"].startswith("aten::")), key=lambda e: e["w"])
    assert target["depth"] >= 1
    at = (canvas["x"] + target["x"] + target["w"] / 2, canvas["y"] + target["y"] + target["h"] / 2)
    page.mouse.move(*at)
    page.wait_for_selector("#timeline-hover:not([hidden])")
    assert page.locator("#timeline-hover").inner_text().startswith(target["name"])
    page.mouse.click(*at)
    page.wait_for_function(
        "name => (document.getElementById('event-name') || {}).textContent === name",
        arg=target["name"],
    )
    details = page.locator("#event-details").inner_text()
    assert "cpu_op" in details
    assert "(python)" in details
    assert "Input Dims" in page.locator("#event-args").inner_text()
    page.screenshot(path=str(tmp_path / "timeline.png"))

    # Find an op by name and jump to it.
    page.fill("#search-q", "addmm")
    page.click("#timeline-search button")
    page.wait_for_selector("#search-matches li a")
    match = page.locator("#search-matches li a").first
    assert "aten::addmm" in match.inner_text()
    before = view(page)
    match.click()
    page.wait_for_function(
        "() => (document.getElementById('event-name') || {}).textContent === 'aten::addmm'"
    )
    assert view(page) != before
    assert refused == []
