"""Environment snapshots: collector time, diff time, history page time.

- collector: ``python -m workers.collect --no-probe`` as a process (what the host
  worker runs before every run), on this machine and on an NPU-shaped host
  (a captured 8-card npu-smi table and a driver/firmware/CANN tree);
- diff: two snapshots of 1,000 packages (100 changed, 20 added, 20 removed);
- history: the history page and the host page of a host with 500 versions,
  rendered through Django's test client (server time, no network).

Targets (issue 3): collector under 2 s without the torch_npu probe, diff under
100 ms, history page under 200 ms. Usage, from the repository root:

    .venv/bin/python bench/snapshots.py              # PostgreSQL when it runs here
    .venv/bin/python bench/snapshots.py --embedded   # SQLite
"""

from __future__ import annotations

import argparse
import copy
import os
import platform as host_platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "platform")]

from bench.common import percentile, write_report  # noqa: E402
from harness.ascend_tree import ASCEND_FIXTURES, build_ascend_tree  # noqa: E402
from harness.services import detect  # noqa: E402

A2_8CARD = ASCEND_FIXTURES / "npu-smi-info/01_910B3_8card_npu-smi-25.2.0_procs_and_no-running.txt"


def timed(function, repeat: int) -> dict[str, float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return {
        "p50_ms": round(statistics.median(samples) * 1000, 2),
        "p95_ms": round(percentile(samples, 0.95) * 1000, 2),
        "runs": repeat,
    }


def collector(work: Path) -> dict[str, dict[str, float]]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    plain = [sys.executable, "-m", "workers.collect", "--no-probe"]
    root = build_ascend_tree(work / "Ascend")
    npu = [*plain, "--ascend-root", str(root), "--npu-smi-output", str(A2_8CARD)]

    def run(argv: list[str]) -> None:
        subprocess.run(argv, env=env, check=True, capture_output=True)

    return {
        "this host": timed(lambda: run(plain), 10),
        "NPU-shaped host": timed(lambda: run(npu), 10),
    }


def diff_time(base: dict) -> dict[str, float]:
    from npulab.snapshots.content import split
    from npulab.snapshots.diff import change_line, diff

    a = copy.deepcopy(base)
    a["python"]["packages"] = {f"package-{i:04d}": f"1.{i % 7}.0" for i in range(1000)}
    b = copy.deepcopy(a)
    for i in range(0, 1000, 10):
        b["python"]["packages"][f"package-{i:04d}"] = "2.0.0"
    for i in range(20):
        del b["python"]["packages"][f"package-{i * 7 + 1:04d}"]
        b["python"]["packages"][f"new-package-{i}"] = "0.1"
    stable_a, stable_b = split(a)[0], split(b)[0]
    changes = diff(stable_a, stable_b)
    assert len(changes["packages"]["added"]) == 20
    return timed(lambda: change_line(diff(stable_a, stable_b)), 200)


def history_time(base: dict) -> dict[str, dict[str, float]]:
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.utils import timezone

    from npulab.hosts.models import Host
    from npulab.snapshots.services import do_record_snapshot

    host = Host.objects.create(name="bench-npu")
    start = timezone.now() - timedelta(days=500)
    for day in range(500):
        document = copy.deepcopy(base)
        document["python"]["packages"]["bench-package"] = f"1.0.{day}"
        document["python"]["packages"][f"bench-extra-{day % 40}"] = f"{day}.0"
        do_record_snapshot(host, document, now=start + timedelta(days=day))
    user = get_user_model().objects.create_user("bench")
    client = Client()
    client.force_login(user)

    def get(path: str) -> None:
        response = client.get(path)
        assert response.status_code == 200, response.status_code

    return {
        "history page, 500 versions": timed(lambda: get("/hosts/bench-npu/history/"), 20),
        "host page (latest 20 of 500)": timed(lambda: get("/hosts/bench-npu/"), 20),
        "API history, 500 versions": timed(
            lambda: get("/api/v1/hosts/bench-npu/history/?limit=500"), 20
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedded", action="store_true", help="SQLite instead of PostgreSQL")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="npulab-bench-snapshots-"))

    if args.embedded:
        os.environ["NPULAB_TEST_SERVICES"] = "embedded"
    services = detect()
    drop = None
    if services.database_url:
        from harness.stack import create_postgres_database

        os.environ["DATABASE_URL"], drop = create_postgres_database(
            services.database_url, "npulab_bench_snapshots"
        )
    else:
        os.environ["DATABASE_URL"] = f"sqlite:///{work / 'bench.sqlite3'}"
    os.environ.setdefault("NPULAB_SECRET_KEY", "bench-only-not-a-secret")
    os.environ["NPULAB_ALLOWED_HOSTS"] = "testserver"
    os.environ["DJANGO_SETTINGS_MODULE"] = "npulab.settings"
    import django

    django.setup()
    from django.core.management import call_command

    from workers.collect.snapshot import collect

    call_command("migrate", verbosity=0)
    base = collect(
        ascend_root=str(build_ascend_tree(work / "tree")),
        etc_dir=str(work),
        npu_smi_output=str(A2_8CARD),
        probe_torch_npu=False,
    )
    try:
        report = {
            "when": datetime.now().isoformat(timespec="seconds"),
            "machine": f"{host_platform.machine()}, {os.cpu_count()} cores",
            "python": sys.version.split()[0],
            "database": services.database_label,
            "collector": collector(work),
            "diff, 1000 packages": diff_time(base),
            "pages": history_time(base),
        }
    finally:
        from django.db import connections

        connections.close_all()
        if drop is not None:
            drop()
    write_report(f"snapshots-{'embedded' if args.embedded else 'services'}", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
