"""The host worker's telemetry thread against a tiny HTTP server standing in for the platform."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.waiting import wait_until
from workers.contract import telemetry as contract
from workers.host import telemetry as host_telemetry
from workers.host.client import PlatformClient
from workers.host.config import HostConfig
from workers.host.telemetry import TelemetrySender

TOKEN = "host-token-for-telemetry"


class Platform:
    """Records every telemetry body; answers 200 with the agreed reply, or ``status``."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.status = 200
        self.rejected: list[dict[str, Any]] = []
        self.failed = 0
        self.lock = threading.Lock()
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with platform.lock:
                    status = platform.status
                    if self.path != "/api/v1/agent/telemetry/":
                        status = 404
                    if status == 200:
                        samples = json.loads(body)["samples"]
                        platform.bodies.append(json.loads(body))
                        platform.headers.append(dict(self.headers))
                        reply = {
                            "accepted": len(samples) - len(platform.rejected),
                            "rejected": platform.rejected,
                        }
                    else:
                        platform.failed += 1
                        reply = {"detail": "unavailable"}
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def samples(self) -> list[dict[str, Any]]:
        with self.lock:
            return [sample for body in self.bodies for sample in body["samples"]]


@pytest.fixture
def platform() -> Iterator[Platform]:
    server = Platform()
    yield server
    server.server.shutdown()
    server.server.server_close()


class Counter:
    """A sampler that numbers its samples in ``time``, so that order and loss show."""

    def __init__(self, per_round: int = 2) -> None:
        self.per_round = per_round
        self.taken = 0
        self.calls: list[tuple[str, list[int] | None]] = []

    def __call__(self, device_type: str, indices: list[int] | None) -> list[dict[str, Any]]:
        self.calls.append((device_type, indices))
        samples = []
        for _ in range(self.per_round):
            self.taken += 1
            samples.append(contract.sample(float(self.taken), 0, readings={"power_w": 1.0}))
        return samples


def sender(platform: Platform, sample: Counter, **kwargs: Any) -> TelemetrySender:
    client = PlatformClient(platform.url, TOKEN, timeout=10)
    return TelemetrySender(client, "npu", [0, 1], sample=sample, **kwargs)


def times(samples: list[dict[str, Any]]) -> list[float]:
    return [sample["time"] for sample in samples]


def test_a_round_posts_the_samples_with_the_host_token(platform: Platform) -> None:
    counter = Counter()
    telemetry = sender(platform, counter)
    telemetry.tick()
    assert counter.calls == [("npu", [0, 1])]
    assert platform.bodies == [
        {
            "samples": [
                contract.validate_sample(contract.sample(t, 0, readings={"power_w": 1.0}))
                for t in (1.0, 2.0)
            ]
        }
    ]
    assert platform.headers[0]["Authorization"] == f"Token {TOKEN}"
    assert not telemetry.backlog


class Clock:
    """The sender's monotonic clock, moved by the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1000.0
        monkeypatch.setattr(host_telemetry.time, "monotonic", lambda: self.now)


def test_rounds_wait_for_the_send_interval_and_go_in_one_request(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch)
    telemetry = sender(platform, Counter(), interval_s=10.0, send_s=30.0)
    telemetry.tick()  # the first round goes at once: the host page has readings from the start
    for _ in range(2):
        clock.now += 10
        telemetry.tick()
    assert len(platform.bodies) == 1
    assert len(telemetry.backlog) == 4
    clock.now += 10
    telemetry.tick()
    assert [times(body["samples"]) for body in platform.bodies] == [
        [1.0, 2.0],
        [3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
    ]
    assert not telemetry.backlog


class Alarming:
    """Device 0 turns from OK to ALARM in round ``turns_at`` (counted from 1)."""

    def __init__(self, turns_at: int) -> None:
        self.turns_at = turns_at
        self.rounds = 0

    def __call__(self, device_type: str, indices: list[int] | None) -> list[dict[str, Any]]:
        self.rounds += 1
        health = "ALARM" if self.rounds >= self.turns_at else "OK"
        return [contract.sample(float(self.rounds), 0, health=health)]


def test_a_health_change_is_sent_at_once(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch)
    telemetry = sender(platform, Alarming(turns_at=3), interval_s=10.0, send_s=60.0)
    for _ in range(4):
        telemetry.tick()
        clock.now += 10
    # Round 1 (the first), round 3 (the alarm) with round 2 before it; round 4 waits.
    assert [times(body["samples"]) for body in platform.bodies] == [[1.0], [2.0, 3.0]]
    assert [sample["health"] for sample in platform.samples()] == ["OK", "OK", "ALARM"]
    assert times(list(telemetry.backlog)) == [4.0]


def test_while_the_platform_is_away_samples_wait_and_go_in_order_after(
    platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    telemetry = sender(platform, Counter())
    platform.status = 503
    with caplog.at_level(logging.WARNING, logger="workers.host.telemetry"):
        for _ in range(5):
            telemetry.tick()
        assert platform.failed == 5
        assert len(telemetry.backlog) == 10
        platform.status = 200
        telemetry.tick()
    assert times(platform.samples()) == [float(n) for n in range(1, 13)]
    messages = [record.getMessage() for record in caplog.records]
    # One line when the streak starts, one when it ends; none per attempt.
    assert len(messages) == 2
    assert "cannot reach the platform" in messages[0]
    assert "HTTP 503" in messages[0]
    assert "back after 5 failed attempt(s); 0 oldest sample(s) were dropped" in messages[1]


def test_the_backlog_is_bounded_and_drops_the_oldest(
    platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    telemetry = sender(platform, Counter(per_round=3), max_backlog=7)
    platform.status = 503
    with caplog.at_level(logging.WARNING, logger="workers.host.telemetry"):
        for _ in range(4):  # 12 samples taken, 7 kept
            telemetry.tick()
        assert len(telemetry.backlog) == 7
        platform.status = 200
        telemetry.tick()  # 3 more, so 3 more of the oldest go before it sends
    assert times(platform.samples()) == [float(n) for n in range(9, 16)]
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 3
    assert "backlog full (7 samples)" in messages[1]
    assert "8 oldest sample(s) were dropped meanwhile (backlog limit 7)" in messages[2]


def test_a_long_backlog_goes_in_batches(platform: Platform) -> None:
    telemetry = sender(platform, Counter(per_round=5), max_batch=4)
    platform.status = 503
    telemetry.tick()
    telemetry.tick()
    platform.status = 200
    assert telemetry.flush() is True
    assert [len(body["samples"]) for body in platform.bodies] == [4, 4, 2]
    assert times(platform.samples()) == [float(n) for n in range(1, 11)]


def test_rejected_samples_are_logged_and_not_resent(
    platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    platform.rejected = [{"index": 1, "field": "readings.power_w", "message": "must be a number"}]
    telemetry = sender(platform, Counter())
    with caplog.at_level(logging.WARNING, logger="workers.host.telemetry"):
        telemetry.tick()
        telemetry.tick()
    assert len(platform.bodies) == 2
    assert "rejected 1 of 2 samples (first: sample 1, readings.power_w: must be a number)" in (
        caplog.records[0].getMessage()
    )


def test_refused_batches_are_dropped_so_newer_ones_go(
    platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    telemetry = sender(platform, Counter())
    platform.status = 400
    with caplog.at_level(logging.WARNING, logger="workers.host.telemetry"):
        telemetry.tick()
        telemetry.tick()
        assert not telemetry.backlog
        platform.status = 200
        telemetry.tick()
    assert times(platform.samples()) == [5.0, 6.0]
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2
    assert "the platform refuses samples (HTTP 400: unavailable)" in messages[0]
    assert "takes samples again; 4 were refused" in messages[1]


def test_an_invalid_sample_is_dropped_before_sending(platform: Platform) -> None:
    def sample(device_type: str, indices: list[int] | None) -> list[dict[str, Any]]:
        return [contract.sample(1.0, 0, readings={"nonsense": 1.0}), contract.sample(2.0, 1)]

    TelemetrySender(PlatformClient(platform.url, TOKEN), "npu", [0, 1], sample=sample).tick()
    assert times(platform.samples()) == [2.0]


def test_the_thread_samples_for_real_until_stopped(platform: Platform) -> None:
    stop = threading.Event()
    client = PlatformClient(platform.url, TOKEN)
    thread = host_telemetry.start(client, "cpu", [0], 0.05, stop, send_s=1.0)
    assert thread is not None
    wait_until(lambda: len(platform.bodies) >= 3, "three telemetry posts")
    # Several rounds a post, after the first.
    assert len(platform.samples()) > 2 * len(platform.bodies)
    stop.set()
    thread.join(timeout=30)
    assert not thread.is_alive()
    samples = platform.samples()
    assert {sample["index"] for sample in samples} == {0, None}
    assert all(contract.validate_sample(sample) == sample for sample in samples)


def test_zero_turns_telemetry_off(platform: Platform) -> None:
    assert (
        host_telemetry.start(PlatformClient(platform.url, TOKEN), "cpu", [0], 0, threading.Event())
        is None
    )


def config(argv: list[str], monkeypatch: pytest.MonkeyPatch, **env: str) -> HostConfig:
    monkeypatch.setenv("NPULAB_HOST_TOKEN", "t")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return HostConfig.from_args(["--broker-url", "memory://", *argv])


def test_the_interval_is_configured_by_flag_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NPULAB_TELEMETRY_S", raising=False)
    assert config([], monkeypatch).telemetry_s == contract.DEFAULT_INTERVAL_S
    assert config([], monkeypatch, NPULAB_TELEMETRY_S="30").telemetry_s == 30.0
    assert config(["--telemetry-s", "0"], monkeypatch, NPULAB_TELEMETRY_S="30").telemetry_s == 0.0


def test_the_send_interval_is_configured_by_flag_or_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NPULAB_TELEMETRY_SEND_S", raising=False)
    assert config([], monkeypatch).telemetry_send_s == contract.DEFAULT_SEND_S
    assert config([], monkeypatch, NPULAB_TELEMETRY_SEND_S="5").telemetry_send_s == 5.0
    argv = ["--telemetry-send-s", "0"]
    assert config(argv, monkeypatch, NPULAB_TELEMETRY_SEND_S="5").telemetry_send_s == 0.0
    for bad in ("-1", "inf", "nan"):
        with pytest.raises(SystemExit):
            config(["--telemetry-send-s", bad], monkeypatch)


@pytest.mark.parametrize(
    ("argv", "env"),
    [(["--telemetry-s", "-1"], "10"), ([], "ten"), (["--telemetry-s", "nan"], "10")],
)
def test_a_bad_interval_is_refused(monkeypatch: pytest.MonkeyPatch, capsys, argv, env) -> None:
    with pytest.raises(SystemExit) as exit_:
        config(argv, monkeypatch, NPULAB_TELEMETRY_S=env)
    assert exit_.value.code != 0
    captured = capsys.readouterr()
    assert "telemetry" in (captured.err + str(exit_.value.code)).lower()
