"""/metrics read back with Prometheus' own parser; who may scrape it; the Grafana dashboard."""

from __future__ import annotations

import json
import re
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from npulab.accounts.services import do_issue_api_token
from npulab.health.models import HostHealth, HostState
from npulab.hosts.services import do_issue_host_token
from npulab.projects.models import default_pool
from npulab.runs.services import do_submit_run
from npulab.telemetry.services import record_samples
from npulab.web.metrics import FAMILIES
from tests.conftest import register, token_client
from tests.factories import HostFactory
from tests.paths import REPO_DIR
from tests.projects.conftest import make_project
from tests.telemetry.conftest import WARNING_8, capture_samples
from workers.contract.telemetry import sample

pytestmark = pytest.mark.django_db
DASHBOARD = REPO_DIR / "deploy" / "grafana" / "npulab-dashboard.json"


def scrape(client) -> dict[str, dict[tuple, float]]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    families = {}
    for family in text_string_to_metric_families(response.content.decode()):
        assert family.type == "gauge"
        families[family.name] = {tuple(sorted(s.labels.items())): s.value for s in family.samples}
    return families


@pytest.fixture
def scraper(owner) -> APIClient:
    """What a Prometheus is given: a read-only token, sent as a bearer token."""
    _, token = do_issue_api_token(owner, scopes=["read"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def labels(host, device, model="Ascend 910B3"):
    return (("device", str(device)), ("host", host), ("model", model))


def test_device_gauges_carry_npu_exporter_names_and_meanings(npu_host, scraper) -> None:
    now = time.time()
    record_samples(npu_host, capture_samples(WARNING_8)(now), now=now)
    metrics = scrape(scraper)
    # Chip 0 of the Atlas 800-9010 capture: 42 °C, 70.5 W, 0 of 32,768 MB HBM; chip 3 WARNING.
    assert metrics["npu_chip_info_temperature"][labels("npu-01", 0)] == 42.0
    assert metrics["npu_chip_info_power"][labels("npu-01", 0)] == 70.5
    assert metrics["npu_chip_info_hbm_total_memory"][labels("npu-01", 0)] == 32768.0
    assert metrics["npu_chip_info_utilization"][labels("npu-01", 0)] == 0.0
    assert metrics["npu_chip_info_health_status"][labels("npu-01", 0)] == 1.0
    assert metrics["npu_chip_info_health_status"][labels("npu-01", 3)] == 0.0
    assert metrics["npulab_device_temperature_celsius"][labels("npu-01", 0)] == 42.0
    assert metrics["npulab_device_processes"][labels("npu-01", 0)] == 4.0
    health = metrics["npulab_device_health"]
    assert health[(*labels("npu-01", 3)[:2], ("model", "Ascend 910B3"), ("state", "WARNING"))] == 1
    assert health[(*labels("npu-01", 3)[:2], ("model", "Ascend 910B3"), ("state", "OK"))] == 0
    assert metrics["npulab_device_last_sample_timestamp_seconds"][labels("npu-01", 7)] == now
    assert metrics["npulab_host_online"][(("host", "npu-01"),)] == 1.0


def test_host_health_is_the_health_apps_state(npu_host, scraper) -> None:
    HostHealth.objects.update_or_create(host=npu_host, defaults={"state": HostState.DRAINED})
    health = scrape(scraper)["npulab_host_health"]
    assert health[(("host", "npu-01"), ("state", "drained"))] == 1
    assert health[(("host", "npu-01"), ("state", "healthy"))] == 0
    assert len(health) == len(HostState.values)


def test_a_cpu_host_gets_only_the_npulab_names(cpu_host, scraper) -> None:
    now = time.time()
    record_samples(
        cpu_host,
        [
            sample(now, 0, "UNKNOWN", {"utilization_pct": 12.5, "memory_used_mb": 2048.0}),
            sample(now, None, readings={"load_1m": 0.75}),
        ],
        now=now,
    )
    metrics = scrape(scraper)
    assert metrics["npulab_device_utilization_percent"][labels("cpu-01", 0, "cpu-0")] == 12.5
    assert metrics["npulab_host_load_1m"][(("host", "cpu-01"),)] == 0.75
    assert not any(name.startswith("npu_chip_info") for name in metrics)


def test_queue_and_run_counts(cpu_host, owner, scraper) -> None:
    do_submit_run(owner, {"kind": "smoke", "device_type": "npu", "wait_for_host": True})
    do_submit_run(owner, {"kind": "smoke", "device_type": "npu", "wait_for_host": True})
    metrics = scrape(scraper)
    assert metrics["npulab_queue_runs"][(("device_type", "npu"),)] == 2
    assert metrics["npulab_queue_runs"][(("device_type", "cpu"),)] == 0
    assert metrics["npulab_runs"][(("kind", "smoke"), ("status", "queued"))] == 2


def test_runs_are_counted_only_where_the_scraper_may_see_them(
    cpu_host, owner, other_user, anon_api, scraper, settings
) -> None:
    # Before: every project's runs were counted for any reader.
    make_project("alpha", [default_pool()], owner=other_user)
    spec = {"kind": "smoke", "device_type": "npu", "wait_for_host": True, "project": "alpha"}
    do_submit_run(other_user, spec)
    metrics = scrape(scraper)
    assert metrics["npulab_queue_runs"][(("device_type", "npu"),)] == 0
    assert (("kind", "smoke"), ("status", "queued")) not in metrics.get("npulab_runs", {})
    assert (
        scrape(token_client(other_user, scopes=["read"]))["npulab_queue_runs"][
            (("device_type", "npu"),)
        ]
        == 1
    )
    settings.NPULAB = {**settings.NPULAB, "METRICS_PUBLIC": True}
    assert scrape(anon_api)["npulab_queue_runs"][(("device_type", "npu"),)] == 0


def test_label_values_from_a_worker_are_escaped(cpu_host, scraper) -> None:
    cpu_host.devices = [{"index": 0, "name": 'evil"} 1\nfake_metric 2'}]
    cpu_host.save(update_fields=["devices"])
    record_samples(cpu_host, [sample(time.time(), 0, "OK", {"power_w": 5.0})])
    metrics = scrape(scraper)
    assert "fake_metric" not in metrics
    (key,) = metrics["npulab_device_power_watts"]
    assert dict(key)["model"] == 'evil"} 1\nfake_metric 2'


def test_one_query_per_family_whatever_the_number_of_hosts(owner, scraper) -> None:
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            scrape(scraper)
        return len(captured)

    host = register(HostFactory(name="h-0"), "npu", 8)
    record_samples(host, capture_samples()(time.time()))
    scrape(scraper)  # the token's first use records it (a write, once a minute)
    few = queries()
    for n in range(1, 6):
        host = register(HostFactory(name=f"h-{n}"), "npu", 8)
        record_samples(host, capture_samples()(time.time()))
    assert queries() == few


def test_scraping_needs_a_read_token_unless_opened(cpu_host, owner, anon_api, settings) -> None:
    assert anon_api.get("/metrics").status_code == 401
    assert anon_api.get("/metrics")["WWW-Authenticate"].startswith("Bearer")
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Bearer npl_not-a-token")
    assert bad.get("/metrics").status_code == 401
    host = APIClient()
    host.credentials(HTTP_AUTHORIZATION=f"Bearer {do_issue_host_token(cpu_host)}")
    assert host.get("/metrics").status_code == 403
    submit_only = token_client(owner, scopes=["submit"])
    assert submit_only.get("/metrics").status_code == 403
    settings.NPULAB = {**settings.NPULAB, "METRICS_PUBLIC": True}
    assert "npulab_host_online" in scrape(anon_api)


def test_every_dashboard_query_names_a_metric_we_export() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exported = {family.name for family in FAMILIES}
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    exprs.append(dashboard["templating"]["list"][1]["query"]["query"])
    assert len(exprs) > 10
    functions = {"sum", "by", "time", "label_values", "host", "status", "state", "device_type"}
    for expr in exprs:
        without_labels = re.sub(r"\{[^}]*\}", "", expr)
        names = set(re.findall(r"[a-z_][a-z0-9_]*", without_labels)) - functions
        assert names, expr
        assert names <= exported, (expr, names - exported)
