"""The collectives runner: the ranks under torch.distributed.run, then their rows as events.

On one host the ranks rendezvous on their own (``--standalone``); across hosts with the
host worker's rendezvous (workers.contract.gang), as training does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

from workers.contract import exits, gang
from workers.kinds.base import Outcome, RunContext
from workers.kinds.collectives import BUSBW
from workers.processes import dying_with_this_process, kill_group, register_group

RESULTS_FILE = "collectives.json"


def launch_argv(spec: dict[str, Any], spec_path: str, out_path: str) -> list[str]:
    nodes = int(os.environ.get(gang.NNODES, "1"))
    if nodes > 1:
        where = [
            f"--nnodes={nodes}",
            f"--node-rank={os.environ[gang.NODE_RANK]}",
            f"--master-addr={os.environ[gang.MASTER_ADDR]}",
            f"--master-port={os.environ[gang.MASTER_PORT]}",
        ]
    else:
        where = ["--standalone", "--nnodes=1"]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *where,
        f"--nproc-per-node={spec['devices']}",
        "-m",
        "workers.kinds.collectives.loop",
        spec_path,
        out_path,
    ]


def run(ctx: RunContext) -> Outcome:
    spec = ctx.spec
    spec_path = os.path.join(ctx.run_dir, "collectives-spec.json")
    out_path = os.path.join(ctx.run_dir, RESULTS_FILE)
    with open(spec_path, "w", encoding="utf-8") as handle:
        json.dump(spec, handle)
    ranks = spec["devices"] * int(os.environ.get(gang.NNODES, "1"))
    ctx.say(f"collectives: {', '.join(spec['ops'])} on {ranks} rank(s), {ctx.backend.name}")
    process = subprocess.Popen(
        launch_argv(spec, spec_path, out_path),
        cwd=ctx.run_dir,
        start_new_session=True,
        preexec_fn=dying_with_this_process(),
    )
    register_group(ctx.run_dir, process.pid)
    previous = signal.signal(signal.SIGTERM, lambda *_: kill_group(process.pid, signal.SIGTERM))
    try:
        code = process.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if code != 0:
        return Outcome(
            exits.FAILED, f"the collectives exited with code {code}", cause=exits.PROCESS_EXIT
        )
    if not os.path.exists(out_path):
        # Every host but node rank 0's: its ranks took part, rank 0 reports.
        return Outcome(exits.SUCCEEDED, "collectives measured (rank 0 reports them)")
    with open(out_path, encoding="utf-8") as handle:
        found = json.load(handle)
    peaks: dict[str, float] = {}
    for row in found["rows"]:
        ctx.events.emit(BUSBW, **row)
        # The curve: bus bandwidth by message size, the size as the step.
        ctx.events.metric(f"busbw_gbps/{row['op']}", row["bytes"], row["busbw_gbps"])
        peaks[row["op"]] = max(peaks.get(row["op"], 0.0), row["busbw_gbps"])
    for line in found["unsupported"]:
        ctx.say(f"not offered by {found['backend']}: {line}")
    summary = {
        "backend": found["backend"],
        "ranks": ranks,
        **{f"{op}_busbw_peak_gbps": round(peak, 4) for op, peak in peaks.items()},
    }
    if not peaks:
        return Outcome(
            exits.FAILED, "no collective could be measured", summary, cause=exits.JOB_ERROR
        )
    best = max(peaks, key=peaks.get)
    return Outcome(exits.SUCCEEDED, f"peak bus bandwidth {peaks[best]:.3f} GB/s ({best})", summary)
