"""The full-log page of a run whose attempt logged about 1 GB: what each request costs.

A running run's attempt gets ``--lines`` log lines (default 10,000,000, about 1 GB of
text) of a training job's output: step lines, a stderr warning now and then, a checkpoint
line every million lines and, half-way, a traceback with a CANN error code. They are
written straight into the database (PostgreSQL COPY, SQLite executemany in one
transaction), as ingestion would have left them: this measures reads. Then, as a logged-in
user, through Django's whole handler in this process (no socket), median of ``--repeat``
after ``--warmup`` requests:

- ``open``: the log page, which for a live run opens on its newest page;
- ``follow``: the live log's refresh (htmx, the newest page);
- ``old_page``: a page by number, a tenth into the log;
- ``first_error``: the page the "First error" link points to;
- ``search_few``: a search with a few hits (the checkpoint lines);
- ``search_none``: a search with none;
- ``stream``: the stderr lines only;
- ``download``: the plain-text download, until its first bytes.

The data is kept (``--reuse`` measures it again, e.g. after a migration):

    .venv/bin/python bench/log_page.py --database-url postgres://postgres@127.0.0.1:5432/db
    .venv/bin/python bench/log_page.py --database-url sqlite:////tmp/log.sqlite3
    .venv/bin/python bench/log_page.py --database-url … --reuse
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform as host_platform
import re
import statistics
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# Last: another commit's code, when given on PYTHONPATH, comes first.
sys.path += [str(REPO), str(REPO / "platform")]

RUN_NAME = "bench: a log of about 1 GB"
CHUNK = 200_000
FEW = "checkpoint saved"
NONE = "no line says this"
TRACEBACK = [
    ("stderr", "Traceback (most recent call last):"),
    ("stderr", '  File "/job/train.py", line 212, in <module>'),
    ("stderr", "    main()"),
    ("stderr", '  File "/job/train.py", line 180, in train_step'),
    ("stderr", "    loss.backward()"),
    ("stderr", "RuntimeError: EL0004: The memory allocation failed on device 3 (HBM full)."),
    ("stdout", "[rank0] retrying the step with a smaller micro-batch"),
]


def log_lines(count: int) -> Iterator[tuple[str, str]]:
    """(stream, line) of a training job's output, ``count`` of them."""
    middle = count // 2
    for n in range(count):
        if middle <= n < middle + len(TRACEBACK):
            yield TRACEBACK[n - middle]
        elif n % 1_000_000 == 999_999:
            yield "stdout", f"[rank0] {FEW} to /ckpt/step_{n:09d}.ckpt (2.31 GiB in 4.2 s)"
        elif n % 997 == 500:
            yield (
                "stderr",
                "/usr/local/lib/python3.9/site-packages/mindspore/ops/primitive.py:714: "
                "UserWarning: the input of MatMul is cast to float16",
            )
        else:
            yield (
                "stdout",
                f"[2026-12-05 05:{n // 60000 % 60:02d}:{n // 1000 % 60:02d}] [INFO] [rank0] "
                f"epoch {n // 400_000} step {n:>9d}/{count} loss {2.5 / (1 + n / 1e6):.5f} "
                f"lr {3e-4 * (1 - n / count):.3e} grad_norm {0.5 + (n % 89) / 100:.3f} "
                f"tokens/s {31000 + n % 4000:>6d}",
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True, help="postgres://… or sqlite:///path")
    parser.add_argument("--lines", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="requests before those measured")
    parser.add_argument("--reuse", action="store_true", help="measure the run written before")
    parser.add_argument("--label", default="", help="a name for the report (before, after)")
    parser.add_argument(
        "--ingest",
        type=int,
        default=0,
        help="instead: time storing this many log lines in batches of 1,000 (store_events)",
    )
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = args.database_url
    os.environ.setdefault("NPULAB_SECRET_KEY", "bench-only")
    os.environ.setdefault("NPULAB_BROKER_URL", "memory://")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "npulab.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import setup_test_environment

    from bench.common import write_report

    setup_test_environment()  # the test client's host name is allowed
    report: dict[str, Any] = {"label": args.label}
    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    report["migrate_s"] = round(time.perf_counter() - started, 1)
    if args.ingest:
        report.update(ingest(args.ingest))
    else:
        run_id = existing_run() if args.reuse else None
        if run_id is None:
            started = time.perf_counter()
            run_id = write_run(args.lines)
            report["write_s"] = round(time.perf_counter() - started, 1)
        report.update(measure(run_id, args.repeat, args.warmup))
    report["machine"] = (
        f"{host_platform.machine()}, {os.cpu_count()} cores, "
        f"Python {host_platform.python_version()}, {connection.vendor}"
    )
    report["load"] = " ".join(f"{load:.1f}" for load in os.getloadavg())
    connection.close()
    mode = "ingest" if args.ingest else "log_page"
    write_report(f"{mode}-{connection.vendor}-{args.label or 'run'}", report)
    return 0


INGEST_BATCH = 1000


def ingest(count: int) -> dict[str, Any]:
    """Log lines stored as a host's batches are (store_events, the run locked, one
    transaction a batch), into a run of their own: the cost of ingestion's line numbering."""
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.utils import timezone

    from npulab.runs.events import store_events
    from npulab.runs.models import Run, RunAttempt
    from npulab.runs.services import do_submit_run

    user = get_user_model().objects.filter(username="bench").first()
    user = user or get_user_model().objects.create_user("bench")
    run = do_submit_run(user, {"kind": "smoke", "device_type": "cpu", "wait_for_host": True})
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, started_at=now, attempt=1)
    RunAttempt.objects.create(run=run, number=1, started_at=now)
    lines = log_lines(count)
    samples, cpu = [], []
    for _ in range(0, count, INGEST_BATCH):
        events = [
            {"type": "log", "time": 1.0, "stream": stream, "line": line}
            for _, (stream, line) in zip(range(INGEST_BATCH), lines, strict=False)
        ]
        started, used = time.perf_counter(), time.process_time()
        with transaction.atomic():
            locked = Run.objects.select_for_update().get(pk=run.pk)
            store_events(locked, events, timezone.now())
        samples.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
    return {
        "lines": count,
        "batch": INGEST_BATCH,
        "batch_ms": _median_ms(samples),
        # This process's CPU (all of SQLite's work; PostgreSQL's server is another process):
        # steadier than the wall time on a shared machine.
        "batch_cpu_ms": _median_ms(cpu),
        "lines_per_s": round(count / sum(samples)),
    }


def existing_run() -> int | None:
    from npulab.runs.models import Run

    return Run.objects.filter(name=RUN_NAME).order_by("pk").values_list("pk", flat=True).last()


def write_run(count: int) -> int:
    """A running run whose first attempt logged ``count`` lines."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from npulab.runs.models import Run, RunAttempt, RunEvent
    from npulab.runs.services import do_submit_run

    user = get_user_model().objects.filter(username="bench").first()
    user = user or get_user_model().objects.create_user("bench")
    run = do_submit_run(
        user, {"kind": "smoke", "device_type": "cpu", "wait_for_host": True, "name": RUN_NAME}
    )
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING, started_at=now, last_heartbeat=now, attempt=1
    )
    attempt = RunAttempt.objects.create(run=run, number=1, started_at=now)
    fields = {field.name for field in RunEvent._meta.concrete_fields}
    numbered = "line_no" in fields  # ingestion numbers an attempt's lines (after issue 34)
    table = RunEvent._meta.db_table
    columns = ["run_id", "attempt", "type", "time", "data", *(["line_no"] if numbered else [])]
    origin = datetime(2026, 12, 5, tzinfo=UTC)
    lines = log_lines(count)
    with transaction.atomic():
        for first in range(0, count, CHUNK):
            rows = []
            for n, (stream, line) in zip(
                range(first, min(count, first + CHUNK)), lines, strict=False
            ):
                at = (origin + timedelta(milliseconds=n)).isoformat()
                data = json.dumps({"stream": stream, "line": line})
                rows.append((run.pk, 1, "log", at, data, *([n + 1] if numbered else [])))
            if connection.vendor == "postgresql":
                _copy(connection, table, columns, rows)
            else:
                marks = ", ".join(["%s"] * len(columns))
                with connection.cursor() as cursor:
                    cursor.executemany(
                        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",  # noqa: S608
                        rows,
                    )
            print(f"{first + len(rows):,} lines", file=sys.stderr, flush=True)
    if numbered:
        # What ingestion keeps on the attempt as the lines come.
        pattern = re.compile(_first_error_pattern())
        error = next(n + 1 for n, (_, line) in enumerate(log_lines(count)) if pattern.search(line))
        RunAttempt.objects.filter(pk=attempt.pk).update(first_error_line=error)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {table}")
    return run.pk


def _first_error_pattern() -> str:
    from npulab.runs import logview

    return logview.FIRST_ERROR


def _copy(connection: Any, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    buffer = io.StringIO()
    for row in rows:
        buffer.write("\t".join(_copy_text(value) for value in row) + "\n")
    sql = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        copy.write(buffer.getvalue())


def _copy_text(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def measure(run_id: int, repeat: int, warmup: int) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username="bench"))
    base = f"/runs/{run_id}/log/"
    opened = client.get(base)
    assert opened.status_code == 200, opened.status_code
    html = opened.content.decode()
    jump = re.search(r'id="first-error" href="([^"]+)"', html)
    assert jump, "no first-error link"
    error_page = dict(part.split("=") for part in jump.group(1).split("#")[0][1:].split("&amp;"))
    pages = re.search(r"Page (\d+) of (\d+)", html)
    last_page = int(pages.group(2)) if pages else 1
    requests = {
        "open": (base, {}, {}),
        "follow": (base, {"attempt": 1, "page": "last"}, {"HTTP_HX_REQUEST": "true"}),
        "old_page": (base, {"attempt": 1, "page": max(1, last_page // 10)}, {}),
        "first_error": (base, error_page, {}),
        "search_few": (base, {"attempt": 1, "q": FEW}, {}),
        "search_none": (base, {"attempt": 1, "q": NONE}, {}),
        "stream": (base, {"attempt": 1, "stream": "stderr"}, {}),
    }
    found: dict[str, Any] = {"run": run_id, "pages": last_page, "first_error_link": jump.group(1)}
    for name, (path, query, headers) in requests.items():
        samples = []
        for _ in range(warmup + repeat):
            started = time.perf_counter()
            response = client.get(path, query, **headers)
            samples.append(time.perf_counter() - started)
            assert response.status_code == 200, (name, response.status_code)
        found[name] = _median_ms(samples[warmup:])
        found[f"{name}_html"] = _summary(response.content.decode())
        print(name, found[name], "ms", found[f"{name}_html"], file=sys.stderr, flush=True)
    samples = []
    for _ in range(warmup + repeat):
        started = time.perf_counter()
        response = client.get(f"/runs/{run_id}/log.txt", {"attempt": 1})
        first = next(iter(response.streaming_content))
        samples.append(time.perf_counter() - started)
        response.close()
        assert first, "no first bytes"
    found["download"] = _median_ms(samples[warmup:])
    print("download", found["download"], "ms", file=sys.stderr, flush=True)
    return found


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


def _summary(html: str) -> str:
    """The log card's summary line, to see that each request answered what it should."""
    found = re.search(r'id="log-summary">\s*<span>(.*?)</span>', html, re.S)
    return re.sub(r"\s+", " ", found.group(1)).strip()[:200] if found else ""


if __name__ == "__main__":
    raise SystemExit(main())
