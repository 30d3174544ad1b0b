"""``manage.py profile_summary TRACE [--json]``: the summary the server stores, for a file on disk.

The same ``npulab.profiles.summary.summarise`` the control task runs, so what it prints is
exactly what the run page shows. Exit code 2 with a message for a trace that is missing,
unreadable or not a trace.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from npulab.profiles.summary import TraceError, summarise

EXIT_BAD_TRACE = 2


def _us(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "-"
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:.2f} s"
    if abs(value) >= 1000:
        return f"{value / 1000:.2f} ms"
    return f"{value:.1f} µs"


def _table(headers: list[str], rows: list[list[Any]], right: set[int] | None = None) -> list[str]:
    right = right or set()
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=False))
        ).rstrip()

    return [line(cells[0]), line(["-" * w for w in widths]), *(line(r) for r in cells[1:])]


def _short(name: str, width: int = 70) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def render(summary: dict[str, Any]) -> str:
    """The summary as readable text (what the command prints without --json)."""
    trace = summary["trace"]
    out = [
        f"{trace['path']}: {trace['format']} trace, device {trace['device']}, "
        f"{trace['ranks']} rank(s), "
        f"{trace['events']} events, {_us(trace['duration_us'])}",
    ]
    if trace.get("hta_last_step_excluded"):
        out.append("(the last profiler step is left out of the device numbers, as HTA does)")
    out += ["", "Device time per rank (HTA temporal breakdown)"]
    out += _table(
        ["rank", "idle", "compute", "non-compute", "kernel span", "idle %"],
        [
            [
                r["rank"],
                _us(r["idle_us"]),
                _us(r["compute_us"]),
                _us(r["non_compute_us"]),
                _us(r["kernel_us"]),
                r["idle_pct"],
            ]
            for r in summary["ranks"]
        ],
        right={1, 2, 3, 4, 5},
    )
    if summary["kernel_types"]:
        out += ["", "Kernel time by type (HTA kernel-type breakdown)"]
        out += _table(
            ["type", "time", "%"],
            [[t["type"], _us(t["us"]), t["pct"]] for t in summary["kernel_types"]],
            right={1, 2},
        )
    if summary["top_kernels"]:
        out += ["", "Top kernels"]
        out += _table(
            ["kernel", "type", "total", "count", "mean"],
            [
                [_short(k["name"]), k["type"], _us(k["us"]), k["count"], _us(k["mean_us"])]
                for k in summary["top_kernels"][:10]
            ],
            right={2, 3, 4},
        )
    ops = summary["top_ops"]
    for key, title in (("by_total", "Top ops by total time"), ("by_self", "Top ops by self time")):
        if ops.get(key):
            out += ["", title]
            out += _table(
                ["op", "input shapes", "total", "self", "count"],
                [
                    [
                        _short(o["name"], 50),
                        _short(o["shapes"], 40),
                        _us(o["total_us"]),
                        _us(o["self_us"]),
                        o["count"],
                    ]
                    for o in ops[key][:10]
                ],
                right={2, 3, 4},
            )
    steps = summary["steps"]
    if steps["count"]:
        out += [
            "",
            f"Steps: {steps['count']}, median {_us(steps['median_us'])}, "
            f"min {_us(steps['min_us'])}, max {_us(steps['max_us'])}",
        ]
    if summary["syncs"]:
        out += ["", "Host-device synchronisations"]
        out += _table(
            ["call", "count", "per step", "total"],
            [
                [
                    s["name"],
                    s["count"],
                    s["per_step"] if s["per_step"] is not None else "-",
                    _us(s["us"]),
                ]
                for s in summary["syncs"]
            ],
            right={1, 2, 3},
        )
    if summary["fallbacks"]:
        out += ["", "Ops that ran on the CPU in a device run"]
        out += _table(
            ["op", "count", "total"],
            [[f["name"], f["count"], _us(f["us"])] for f in summary["fallbacks"]],
            right={1, 2},
        )
    npu = summary.get("npu")
    if npu and npu.get("kernel_details"):
        out += ["", "NPU device time by core (kernel_details.csv)"]
        out += _table(
            ["core", "count", "time", "%"],
            [
                [c["core"], c["count"], _us(c["us"]), c["pct"]]
                for c in npu["kernel_details"]["by_core"]
            ],
            right={1, 2, 3},
        )
    if npu and npu.get("step_trace_time"):
        st = npu["step_trace_time"]
        out += [
            "",
            f"NPU steps (step_trace_time.csv): computing {st['computing_pct']} %, "
            f"communication not overlapped {st['communication_pct']} %, free {st['free_pct']} %",
        ]
    out += ["", "Findings"]
    if not summary["findings"]:
        out.append("  none")
    for f in summary["findings"]:
        out.append(f"  [{f['severity']}] {f['title']}")
        out.append(f"      {f['evidence']}  (at {f['ts_us']}, span {f['dur_us']})")
    return "\n".join(out) + "\n"


class Command(BaseCommand):
    help = "Print the summary of a trace file or ascend_pt folder (what the server stores for it)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "trace", help="a .json or .json.gz trace, an *_ascend_pt folder, or a folder of them"
        )
        parser.add_argument(
            "--json", action="store_true", help="print the summary as JSON, exactly as stored"
        )

    def handle(self, *args: Any, trace: str, json: bool = False, **options: Any) -> None:
        try:
            summary = summarise(trace)
        except (TraceError, OSError) as exc:
            self.stderr.write(f"profile_summary: {exc}")
            sys.exit(EXIT_BAD_TRACE)
        if json:
            self.stdout.write(_dumps(summary))
        else:
            self.stdout.write(render(summary), ending="")


def _dumps(summary: dict[str, Any]) -> str:
    return json.dumps(summary, indent=2, ensure_ascii=False)
