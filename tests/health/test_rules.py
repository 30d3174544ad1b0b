"""The health rules, driven by telemetry made from the real npu-smi captures."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from npulab.audit.models import AuditEntry
from npulab.celery import app
from npulab.health.models import DeviceHealth, HealthChange, HostHealth
from npulab.health.services import mark_device_bad, sweep_health
from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import (
    do_cancel_run,
    do_claim_run,
    do_finish_run,
    do_mark_run_lost,
    do_submit_run,
)
from tests.health.npu_samples import ALARM_310B4, IDLE_8CARD, WARNING_8CARD, device, ecc, samples
from workers.contract.tasks import DELIVER_HEALTH_WEBHOOK, SWEEP_HEALTH

pytestmark = pytest.mark.django_db


def states(host) -> dict[int, str]:
    return dict(DeviceHealth.objects.filter(host=host).values_list("index", "state"))


def test_two_cards_with_health_warning_make_the_host_degraded(npu_host, send) -> None:
    host = npu_host()
    send(host, lambda t: samples(WARNING_8CARD, t))
    health = HostHealth.objects.get(host=host)
    assert health.state == "degraded"
    assert states(host) == {i: "degraded" if i in (3, 7) else "healthy" for i in range(8)}
    assert [(r["rule"], r["device"], r["level"]) for r in health.reasons] == [
        ("chip_health", 3, "degraded"),
        ("chip_health", 7, "degraded"),
    ]
    assert health.reasons[0]["detail"] == "chip Health is Warning (npu-smi)"
    assert health.reasons[0]["since"].endswith("Z")
    changes = HealthChange.objects.filter(host=host).order_by("id")
    assert [(c.device, c.previous, c.state) for c in changes] == [
        (3, "healthy", "degraded"),
        (7, "healthy", "degraded"),
        (None, "healthy", "degraded"),
    ]
    # Degraded still takes runs.
    assert health.closed is False


def test_a_chip_in_alarm_makes_its_one_chip_host_unhealthy(npu_host, send) -> None:
    host = npu_host("orangepi", devices=1)
    send(host, lambda t: samples(ALARM_310B4, t))
    health = HostHealth.objects.get(host=host)
    assert (health.state, states(host)) == ("unhealthy", {0: "unhealthy"})
    assert health.reasons[0]["detail"] == "chip Health is Alarm (npu-smi)"


def test_health_back_to_ok_clears_the_reason_and_records_when(npu_host, send) -> None:
    host = npu_host()
    send(host, lambda t: samples(WARNING_8CARD, t))
    send(host, lambda t: samples(IDLE_8CARD, t))
    health = HostHealth.objects.get(host=host)
    assert (health.state, health.reasons) == ("healthy", [])
    assert HealthChange.objects.filter(host=host, device=None).first().state == "healthy"


def test_a_chip_hot_for_n_samples_in_a_row_is_degraded(npu_host, send, settings) -> None:
    settings.NPULAB = {**settings.NPULAB, "HEALTH_TEMPERATURE_LIMIT_C": 90}
    host = npu_host()
    needed = settings.NPULAB["HEALTH_TEMPERATURE_SAMPLES"]
    for _ in range(needed - 1):
        send(host, lambda t: device(IDLE_8CARD, 2, t, temperature_c=96.0))
    assert states(host)[2] == "healthy"
    send(host, lambda t: device(IDLE_8CARD, 2, t, temperature_c=97.0))
    assert states(host)[2] == "degraded"
    reason = DeviceHealth.objects.get(host=host, index=2).reasons[0]
    assert reason["detail"] == f"temperature above 90 °C for {needed} samples (now 97 °C)"
    # One cool sample ends the streak.
    send(host, lambda t: device(IDLE_8CARD, 2, t))
    assert states(host)[2] == "healthy"


def test_a_hot_sample_between_cool_ones_is_noise(npu_host, send, settings) -> None:
    settings.NPULAB = {**settings.NPULAB, "HEALTH_TEMPERATURE_SAMPLES": 2}
    host = npu_host()
    for temperature in (99.0, 40.0, 99.0, 40.0):
        send(
            host,
            lambda t, temperature=temperature: device(IDLE_8CARD, 0, t, temperature_c=temperature),
        )
    assert states(host)[0] == "healthy"


def test_new_uncorrectable_ecc_errors_make_the_device_unhealthy(npu_host, send) -> None:
    host = npu_host()
    # Errors from before the platform watched are the baseline, not news.
    send(host, lambda t: device(IDLE_8CARD, 1, t, **ecc(0, 4)))
    assert states(host)[1] == "healthy"
    send(host, lambda t: device(IDLE_8CARD, 1, t, **ecc(0, 5)))
    assert states(host)[1] == "unhealthy"
    # It stays so: an error that happened does not heal.
    send(host, lambda t: device(IDLE_8CARD, 1, t, **ecc(0, 5)))
    assert states(host)[1] == "unhealthy"
    assert HostHealth.objects.get(host=host).state == "degraded"  # seven devices left


def test_correctable_ecc_errors_degrade_past_the_threshold(npu_host, send, settings) -> None:
    host = npu_host()
    step = settings.NPULAB["HEALTH_ECC_SINGLE_BIT_INCREASE"]
    send(host, lambda t: device(IDLE_8CARD, 0, t, **ecc(100, 0)))
    send(host, lambda t: device(IDLE_8CARD, 0, t, **ecc(100 + step - 1, 0)))
    assert states(host)[0] == "healthy"
    send(host, lambda t: device(IDLE_8CARD, 0, t, **ecc(100 + step, 0)))
    assert states(host)[0] == "degraded"


def test_isolated_pages_degrade_when_new_and_make_unhealthy_past_the_limit(
    npu_host, send, settings
) -> None:
    host = npu_host()
    send(host, lambda t: device(IDLE_8CARD, 5, t, retired_pages=0.0))
    send(host, lambda t: device(IDLE_8CARD, 5, t, retired_pages=1.0))
    assert states(host)[5] == "degraded"
    hard = settings.NPULAB["HEALTH_RETIRED_PAGES_UNHEALTHY"]
    send(host, lambda t: device(IDLE_8CARD, 5, t, retired_pages=float(hard)))
    assert states(host)[5] == "unhealthy"


def test_a_host_whose_heartbeat_is_too_old_is_offline_then_comes_back(npu_host, settings) -> None:
    host = npu_host()
    later = timezone.now() + timedelta(seconds=settings.NPULAB["HEALTH_HEARTBEAT_MAX_AGE_S"] + 5)
    assert sweep_health(later) == 1
    health = HostHealth.objects.get(host=host)
    assert health.state == "offline"
    assert health.reasons[0]["rule"] == "heartbeat"
    assert health.reasons[0]["detail"].startswith("no heartbeat for ")
    assert sweep_health() == 1
    assert HostHealth.objects.get(host=host).state == "healthy"


def failed_to_start(owner, host) -> Run:
    """A run whose runner could not start on ``host``: an infrastructure cause that blames it."""
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "npu"})
    place_queued_runs()
    run.refresh_from_db()
    assert run.host == host, run.queue_reason
    do_claim_run(host, run.pk, run.attempt)
    report = {"exit_code": 1, "error": "cannot execute /opt/conda/envs/npu/bin/python"}
    assert do_finish_run(host, run.pk, run.attempt, report).exit_cause == "start_failed"
    return run


def test_k_infrastructure_failures_in_the_window_make_the_host_unhealthy(
    owner, npu_host, settings
) -> None:
    host = npu_host()
    needed = settings.NPULAB["HEALTH_INFRA_FAILURES"]
    runs = [failed_to_start(owner, host) for _ in range(needed - 1)]
    assert HostHealth.objects.get(host=host).state == "healthy"
    runs.append(failed_to_start(owner, host))
    health = HostHealth.objects.get(host=host)
    assert health.state == "unhealthy"
    assert health.reasons[0]["rule"] == "infra_failures"
    assert f"run {runs[-1].pk} start_failed" in health.reasons[0]["detail"]
    # Nothing new goes there now.
    waiting = do_submit_run(owner, {"kind": "smoke", "device_type": "npu"})
    place_queued_runs()
    waiting.refresh_from_db()
    assert waiting.status == "queued"
    assert "npu-01 is unhealthy: " in waiting.queue_reason
    # The failures leave the window; the host is back.
    later = timezone.now() + timedelta(seconds=settings.NPULAB["HEALTH_INFRA_WINDOW_S"] + 1)
    settings.NPULAB = {**settings.NPULAB, "HEALTH_HEARTBEAT_MAX_AGE_S": 10**9}
    sweep_health(later)
    assert HostHealth.objects.get(host=host).state == "healthy"


def test_a_cancelled_or_lost_run_does_not_count_against_the_host(owner, npu_host, settings) -> None:
    settings.NPULAB = {**settings.NPULAB, "HEALTH_INFRA_FAILURES": 1}
    host = npu_host()
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "npu"})
    place_queued_runs()
    run.refresh_from_db()
    do_claim_run(host, run.pk, run.attempt)
    do_cancel_run(run.pk, owner)
    do_mark_run_lost(run.pk, timezone.now(), "gone")  # cancelled, not lost
    run.refresh_from_db()
    assert run.status == "cancelled"
    # A lost worker says nothing about the host (exits.Cause.blames_host); the heartbeat
    # rule covers a host that fell silent.
    lost = do_submit_run(owner, {"kind": "smoke", "device_type": "npu"})
    place_queued_runs()
    lost.refresh_from_db()
    do_claim_run(host, lost.pk, lost.attempt)
    do_mark_run_lost(lost.pk, timezone.now(), "the host worker went away")
    lost.refresh_from_db()
    assert lost.exit_cause == "worker_lost"
    assert not HostHealth.objects.filter(host=host, state="unhealthy").exists()


def test_a_device_marked_bad_degrades_its_host_and_is_audited(npu_host) -> None:
    host = npu_host()
    mark_device_bad(host, 6, "throughput fell 40 % below the first interval", run=41)
    device_health = DeviceHealth.objects.get(host=host, index=6)
    assert device_health.state == "bad"
    assert device_health.reasons[0]["detail"] == (
        "throughput fell 40 % below the first interval (run 41)"
    )
    assert HostHealth.objects.get(host=host).state == "degraded"
    entry = AuditEntry.objects.get(action="health.mark_device_bad")
    assert (entry.actor_kind, entry.target_label, entry.data) == (
        "system",
        "npu-01 device 6",
        {"device": 6, "run": 41},
    )


def test_a_bad_mark_survives_healthy_samples(npu_host, send) -> None:
    host = npu_host()
    mark_device_bad(host, 0, "stability run failed")
    send(host, lambda t: samples(IDLE_8CARD, t))
    assert states(host)[0] == "bad"


def test_an_unchanged_host_is_not_written_again(npu_host, send) -> None:
    host = npu_host()
    send(host, lambda t: samples(IDLE_8CARD, t))
    sweep_health()
    with CaptureQueriesContext(connection) as queries:
        sweep_health()
        send(host, lambda t: samples(IDLE_8CARD, t))
    writes = [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith("UPDATE")]
    assert [sql for sql in writes if "health_" in sql] == []


def test_the_sweep_and_the_webhook_are_control_tasks_on_the_beat(settings) -> None:
    app.loader.import_default_modules()
    assert {SWEEP_HEALTH, DELIVER_HEALTH_WEBHOOK} <= set(app.tasks)
    # Every tick, inside the control tick's one task (tests/core/test_tick.py).
    assert SWEEP_HEALTH in settings.CONTROL_TICK
