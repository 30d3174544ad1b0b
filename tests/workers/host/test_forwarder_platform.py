"""The forwarder against the real platform, through a proxy that fails on purpose: every
event is stored exactly once through 5xx answers, lost replies, a timeout, a 409 resync
and the web down and back, and the lines arrive as the file holds them."""

from __future__ import annotations

import collections
import select
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from npulab.hosts.services import do_issue_host_token
from npulab.runs.models import Run, RunEvent
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_submit_run
from tests.runs.test_attempts import started
from tests.workers.host.fakes import checkpoint_steps
from tests.workers.host.test_packing import unpacked
from workers.contract.blocks import BLOCKS
from workers.contract.events import CHECKPOINT, EVENTS_FILE, RUNNER
from workers.events import EventWriter
from workers.host.client import PlatformClient, PlatformUnavailable
from workers.host.forwarder import Forwarder, RunGone, max_batch_events
from workers.host.packing import pack

pytestmark = pytest.mark.django_db(transaction=True)


class FaultyProxy:
    """Passes requests to the platform, unless the next programmed fault says otherwise:

    ``5xx``: answers 503 and passes nothing; ``down``: drops the connection unread, as a
    web that is not there; ``lost``: passes the request, then drops the connection
    without its reply; ``timeout``: passes it, then holds the reply until the client
    gives up waiting. ``bodies`` keeps what reached the platform.
    """

    def __init__(self, upstream: str) -> None:
        self.faults: collections.deque[str] = collections.deque()
        self.hit: list[str] = []
        self.bodies: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                with proxy.lock:
                    fault = proxy.faults.popleft() if proxy.faults else ""
                    if fault:
                        proxy.hit.append(fault)
                if fault == "down":
                    self.close_connection = True
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if fault == "5xx":
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                headers = {
                    name: self.headers[name]
                    for name in ("Authorization", "Content-Type")
                    if self.headers[name]
                }
                # No keep-alive: the live server's thread would hold the test's database.
                headers["Connection"] = "close"
                reply = requests.post(upstream + self.path, data=body, headers=headers, timeout=60)
                with proxy.lock:
                    proxy.bodies.append((self.headers.get("Content-Type", ""), body))
                if fault == "timeout":
                    # Until the client hangs up: it timed out, the platform stored the batch.
                    select.select([self.connection], [], [], 60)
                if fault in ("lost", "timeout"):
                    self.close_connection = True
                    return
                self.send_response(reply.status_code)
                self.send_header("Content-Type", reply.headers.get("Content-Type", ""))
                self.send_header("Content-Length", str(len(reply.content)))
                self.end_headers()
                self.wfile.write(reply.content)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def proxy(live_server: Any) -> Iterator[FaultyProxy]:
    proxy = FaultyProxy(live_server.url)
    yield proxy
    proxy.close()


def points(api: Any, run: Run, key: str) -> list[list[Any]]:
    body = api.get(f"/api/v1/runs/{run.pk}/metrics/", {"key": key}).json()
    return body["points"]


def test_every_event_is_stored_once_through_failures_of_every_kind(
    proxy: FaultyProxy, owner: Any, cpu_host: Any, api: Any, tmp_path: Path
) -> None:
    run = started(owner, cpu_host)
    # A short timeout: the proxy's held reply is given up on quickly.
    client = PlatformClient(proxy.url, do_issue_host_token(cpu_host), timeout=5.0)
    path = tmp_path / EVENTS_FILE
    writer = EventWriter(str(path))
    for step in range(300):
        writer.metrics(step, {"loss": 1.0 / (step + 1)})
    writer.log("stdout", "after 300 steps")
    writer.emit("checkpoint", step=299, path="/ckpt/299", bytes=10, sha256="0" * 64)
    with open(path, "ab") as handle:
        handle.write(b"a line that is no JSON, with a NUL \x00\n")
    first_part = path.stat().st_size
    fw = Forwarder(
        client, run.pk, run.attempt, str(tmp_path), max_events=10_000, acted_on=(CHECKPOINT,)
    )

    proxy.faults.extend(["5xx", "lost"])
    for _ in range(2):
        with pytest.raises(PlatformUnavailable):
            fw.pump()
    assert fw.offset == 0  # stored once (the lost reply), but the forwarder cannot know
    # More lines before the retry: it runs past what is held, 409, and resumes from there.
    for step in range(300, 500):
        writer.metrics(step, {"loss": 1.0 / (step + 1)})
    writer.log("stdout", "the end")
    writer.close()
    assert fw.pump() is True
    assert fw.offset == first_part
    assert checkpoint_steps(fw) == [299]  # acknowledged through the resync

    proxy.faults.extend(["timeout", "down", "down"])
    fw.drain()

    assert proxy.hit == ["5xx", "lost", "timeout", "down", "down"]
    assert fw.offset == path.stat().st_size == Run.objects.get(pk=run.pk).events_offset
    loss = points(api, run, "loss")
    assert [step for step, _ in loss] == list(range(500))
    assert [value for _, value in loss] == [1.0 / (step + 1) for step in range(500)]
    logs = [
        (data.get("stream"), data["line"])
        for data in RunEvent.objects.filter(run=run, type="log")
        .order_by("pk")
        .values_list("data", flat=True)
    ]
    assert logs[0] == ("stdout", "after 300 steps")
    assert logs[1][0] == RUNNER
    assert logs[1][1].startswith("a line that is no JSON")
    assert logs[2] == ("stdout", "the end")
    assert len(logs) == 3
    # What reached the platform is the file's bytes, its metric lines packed, every batch.
    data = path.read_bytes()
    assert all(content_type == BLOCKS for content_type, _ in proxy.bodies)
    assert proxy.bodies[0][1] == pack(data[:first_part])[0]
    assert proxy.bodies[-1][1] == pack(data[first_part:])[0]


def test_batches_stay_within_the_size_the_platform_says_it_takes(
    proxy: FaultyProxy, owner: Any, cpu_host: Any, api: Any, tmp_path: Path, settings: Any
) -> None:
    # An operator may set NPULAB_MAX_EVENTS_PER_BATCH as low as 100; a batch over it is a
    # 400, which the host takes for the platform refusing the run (and stops it).
    settings.NPULAB = {**settings.NPULAB, "MAX_EVENTS_PER_BATCH": 100}
    run = do_submit_run(owner, {"kind": "training", "device_type": "cpu", "entry": "builtin:cnn"})
    place_queued_runs()
    client = PlatformClient(proxy.url, do_issue_host_token(cpu_host))
    claim = client.claim(run.pk, Run.objects.get(pk=run.pk).attempt)
    assert claim["max_events"] == 100
    path = tmp_path / EVENTS_FILE
    writer = EventWriter(str(path))
    for step in range(1000):
        writer.metrics(step, {"loss": 1.0 / (step + 1)})
    writer.close()

    with pytest.raises(RunGone, match="at most 100 events"):
        Forwarder(client, run.pk, claim["attempt"], str(tmp_path)).pump()
    proxy.bodies.clear()
    fw = Forwarder(
        client, run.pk, claim["attempt"], str(tmp_path), max_events=max_batch_events(claim)
    )
    fw.drain()

    assert fw.offset == path.stat().st_size == Run.objects.get(pk=run.pk).events_offset
    assert [step for step, _ in points(api, run, "loss")] == list(range(1000))
    sent = [events_in(body) for _, body in proxy.bodies]
    assert sum(sent) == 1000
    assert max(sent) == 100


def events_in(body: bytes) -> int:
    """The events a compact body stands for: its lines and its blocks' points."""
    return sum(
        len(frame[2]) if kind == "block" else frame.count(b"\n") for kind, frame in unpacked(body)
    )


def test_a_platform_that_names_no_batch_size_gets_the_old_one() -> None:
    assert max_batch_events({"run": 1, "attempt": 1}) == 5000
    assert max_batch_events({"max_events": 20_000}) == 10_000
    assert max_batch_events({"max_events": 10_000}) == 10_000
    assert max_batch_events({"max_events": 100}) == 100
    for nonsense in (0, -5, "100", None, 2.5):
        assert max_batch_events({"max_events": nonsense}) == 5000
