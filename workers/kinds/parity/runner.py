"""The parity run: the script as side a and as side b, then msprobe's compare, judged.

Each side runs as a process of its own (in the run's process group, so a timeout or a
cancel stops it) with the spec's seed, the side's device type, dtype, AMP level and
environment, and writes its msprobe dump and its losses into ``parity/<side>/`` of the
run directory. The sides run at the same time when one of them is on the CPU (the usual
float32 reference on the CPU against the accelerator, or both on a CPU host); two sides
on the run's accelerator take turns. A side's tensor dump beyond ``max_dump_mb`` makes
both sides compare statistics only (those a tensor dump holds: no side runs twice; one
still to run dumps statistics only). Every way a comparison
cannot be made (a failed side, layers that differ in shape, no msprobe, a dump msprobe
cannot read) ends the run with a cause that says so.

Sides on hosts of their own (the platform's placements apart: ``NODE_RANK`` of
``NPULAB_NNODES``) run at the same time: node 1 runs side a and hands its dump and losses
over as one file (the handoff capability's artifact), node 0 runs side b, waits for that
file in ``NPULAB_HANDOFF_DIR`` and compares. Side a's dump is bounded there, before it
travels: beyond ``max_dump_mb`` it goes as statistics only, and side b's follows.
"""

from __future__ import annotations

import csv
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from workers.contract import exits, script_env
from workers.contract.capabilities import HANDOFF, HANDOFF_FAILED
from workers.contract.devices import CPU
from workers.contract.gang import NNODES, NODE_RANK
from workers.kinds.base import Outcome, RunContext
from workers.kinds.parity import (
    BUILTIN_MLP,
    DIVERGED,
    HANDOFF_FILE,
    LAYER,
    LAYER_FIELDS,
    MAX_LAYERS,
    NODE_SIDES,
    NOT_COMPARABLE,
    SHAPE_MISMATCH,
    SIDE_FAILED,
    SIDES,
    apart,
    loss_parity,
    side_thresholds,
)
from workers.kinds.parity.compare import (
    BROKE_SHAPE,
    first_divergent,
    judge,
    script_frames,
    stack_of,
)
from workers.parity import DUMP_DIR, INT8_FILE, INT8_SIDE, LOSS_FILE
from workers.tracebacks import exception_line

TENSOR, STATISTICS = "tensor", "statistics"
INT8_PASS = {"device_type": "cpu", "dtype": "float32", "amp_level": "O0", "env": {}}
STDERR_TAIL_CHARS = 64 * 1024
# The loss series of each side, overlaid on the run page.
LOSS_KEY = "parity_loss/{side}"
# How often side b looks for side a's file while it waits.
HANDOFF_POLL_S = 0.5
# ``python -m msprobe.msprobe``, ended by os._exit once the command is done (its process
# pool joined, its CSV written and closed): the interpreter's teardown of the modules torch
# and msprobe import cost about a second of CPU more, a fifth of a small model's compare.
MSPROBE_COMPARE = """
import logging, os, runpy, sys
sys.argv = ["msprobe"] + sys.argv[1:]
code = 0
try:
    runpy.run_module("msprobe.msprobe", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    if isinstance(exc.code, str):
        sys.stderr.write(exc.code + "\\n")
    code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
logging.shutdown()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
"""


def run(ctx: RunContext) -> Outcome:
    spec = ctx.spec
    thresholds = side_thresholds(spec)
    root = os.path.join(ctx.run_dir, "parity")
    if importlib.util.find_spec("msprobe") is None:
        # Checked first: a side would only fail at its dump, after its work.
        return Outcome(
            exits.FAILED,
            "msprobe is not installed in the run's interpreter "
            f"({sys.executable}): pip install 'mindstudio-probe>=26.2'",
            cause=NOT_COMPARABLE,
        )
    if spec["dump_a"]:
        return _existing(ctx, root, thresholds)
    if apart(spec) and os.environ.get(NNODES) == str(len(NODE_SIDES)):
        side = NODE_SIDES[int(os.environ.get(NODE_RANK, "0"))]
        return _hand_over(ctx, root) if side == "a" else _take_over(ctx, root, thresholds)
    at_once = share_no_device(spec)
    if at_once:
        first_failed = _run_sides_at_once(ctx, root)
        if first_failed:
            side, failed = first_failed
            return _side_failed(side, failed)
    task = TENSOR
    for index, side in enumerate(SIDES):
        failed = "" if at_once else _run_side(ctx, root, side, task)
        if failed:
            return _side_failed(side, failed)
        size = _tree_bytes(os.path.join(root, side, DUMP_DIR))
        if task == TENSOR and size > spec["max_dump_mb"] * 1024 * 1024:
            ctx.say(
                f"parity: side {side}'s tensor dump is {size} bytes, over max_dump_mb "
                f"({spec['max_dump_mb']}); both sides compare statistics only"
            )
            task = STATISTICS
            # The sides that ran keep their statistics and lose their tensor files.
            for done in SIDES if at_once else SIDES[: index + 1]:
                as_statistics(os.path.join(root, done, DUMP_DIR))
    return _compare_sides(ctx, root, thresholds, task)


def _side_failed(side: str, why: str) -> Outcome:
    return Outcome(exits.FAILED, f"side {side} failed: {why}", cause=SIDE_FAILED)


def share_no_device(spec: dict[str, Any]) -> bool:
    """Whether the sides run at the same time: when at least one of them is on the CPU.
    Two sides on the run's accelerator take turns, as each may need all of its memory."""
    return any((spec[side]["device_type"] or spec["device_type"]) == CPU for side in SIDES)


def _run_sides_at_once(ctx: RunContext, root: str) -> tuple[str, str] | None:
    """Both sides' tensor dumps, their processes side by side: None when both exited 0,
    else the side that failed first and why, the other stopped then (there is nothing to
    compare it with). The statistics-only fallback holds both tensor dumps for a moment,
    which one after the other never did."""
    started = {side: _start_side(ctx, root, side, TENSOR) for side in SIDES}
    first_failed = None
    with ThreadPoolExecutor(len(started)) as pool:
        waits = {pool.submit(_ended, process): side for side, process in started.items()}
        for done in as_completed(waits):
            failed = done.result()
            if failed and first_failed is None:
                first_failed = (waits[done], failed)
                for process in started.values():
                    if process.poll() is None:
                        process.kill()
    return first_failed


def _hand_over(ctx: RunContext, root: str) -> Outcome:
    """Side a on a host of its own: its dump (statistics only beyond max_dump_mb) and losses
    go to side b's host as one handoff file, which the host worker uploads before the end."""
    failed = _run_side(ctx, root, "a", TENSOR)
    if failed:
        return _side_failed("a", failed)
    dump = os.path.join(root, "a", DUMP_DIR)
    task = TENSOR
    size = _tree_bytes(dump)
    if size > ctx.spec["max_dump_mb"] * 1024 * 1024:
        ctx.say(
            f"parity: side a's tensor dump is {size} bytes, over max_dump_mb "
            f"({ctx.spec['max_dump_mb']}); it goes to side b as statistics only"
        )
        task = STATISTICS
        as_statistics(dump)
    path = os.path.join(root, HANDOFF_FILE)
    _pack(os.path.join(root, "a"), path)
    ctx.events.artifact(HANDOFF_FILE, path, kind=HANDOFF)
    handed = os.path.getsize(path)
    summary = {"side": "a", "mode": task, "dump_bytes": _tree_bytes(dump), "handoff_bytes": handed}
    return Outcome(
        exits.SUCCEEDED, f"side a's {task} dump handed to side b ({handed} bytes)", summary
    )


def _take_over(ctx: RunContext, root: str, thresholds: dict[str, float]) -> Outcome:
    """Side b on a host of its own: run it, wait for side a's file, compare here.

    The wait has no deadline of its own: the run's timeout bounds it, and a side a that
    fails stops this side through the platform (its acknowledgement says cancel).
    """
    failed = _run_side(ctx, root, "b", TENSOR)
    if failed:
        return _side_failed("b", failed)
    arrived, why_not = _wait_for_side_a(ctx)
    if not arrived:
        return Outcome(
            exits.FAILED, f"side a's dump cannot arrive: {why_not}", cause=NOT_COMPARABLE
        )
    try:
        _unpack(arrived, os.path.join(root, "a"))
    except (OSError, tarfile.TarError, ValueError) as exc:
        return Outcome(exits.FAILED, f"side a's dump cannot be read: {exc}", cause=NOT_COMPARABLE)
    steps = [_step_dir(root, side) for side in SIDES]
    size = _tree_bytes(os.path.join(root, "b", DUMP_DIR))
    task = TENSOR
    if all(steps) and (_summary_only(steps[0]) or size > ctx.spec["max_dump_mb"] * 1024 * 1024):
        # The sides must be alike for msprobe: statistics are in a tensor dump already.
        task = STATISTICS
        for side in SIDES:
            as_statistics(os.path.join(root, side, DUMP_DIR))
    return _compare_sides(ctx, root, thresholds, task)


def _wait_for_side_a(ctx: RunContext) -> tuple[str, str]:
    """(the path of side a's file, "") once the host worker has put it here, or ("", why)
    when it cannot come: the host worker's note beside its name says why."""
    folder = os.environ.get(script_env.HANDOFF_DIR, "")
    if not folder:
        return "", f"no {script_env.HANDOFF_DIR} (a host worker without the handoff capability)"
    path = os.path.join(folder, HANDOFF_FILE)
    note = path + HANDOFF_FAILED
    if not os.path.exists(path):
        ctx.say("parity: side b is done; waiting for side a's dump from its host")
        ctx.events.flush()
    while not os.path.exists(path):
        if os.path.exists(note):
            with open(note, encoding="utf-8", errors="replace") as handle:
                return "", "the host worker could not fetch it: " + handle.read(2000)
        time.sleep(HANDOFF_POLL_S)
    return path, ""


def _pack(folder: str, path: str) -> None:
    with tarfile.open(path, "w") as tar:
        tar.add(folder, arcname=".")


def _unpack(path: str, folder: str) -> None:
    """Extract side a's file: regular files and folders inside ``folder`` only (it came over
    the network, from another host's run)."""
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    root = os.path.realpath(folder)
    with tarfile.open(path, "r") as tar:
        for member in tar:
            target = os.path.realpath(os.path.join(root, member.name))
            if os.path.commonpath([root, target]) != root:
                raise ValueError(f"{member.name} leads outside the dump")
            if member.isdir():
                os.makedirs(target, exist_ok=True)
            elif member.isfile():
                source = tar.extractfile(member)
                assert source is not None  # a regular file
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with source, open(target, "wb") as handle:
                    shutil.copyfileobj(source, handle)


def as_statistics(dump: str) -> None:
    """Make a tensor dump a statistics one, in place: msprobe's dump.json of a tensor dump
    holds each tensor's statistics already, beside the name of its file, which goes."""
    for path in glob.glob(os.path.join(dump, "step*", "*", "dump.json")):
        with open(path) as handle:
            found = json.load(handle)
        if found.get("task") == STATISTICS:
            continue
        found["task"] = STATISTICS
        found["dump_data_dir"] = None
        _drop_data_names(found.get("data"))
        with open(path, "w") as handle:
            json.dump(found, handle)
        shutil.rmtree(os.path.join(os.path.dirname(path), "dump_tensor_data"), ignore_errors=True)


def _drop_data_names(value: Any) -> None:
    if isinstance(value, dict):
        value.pop("data_name", None)
        for item in value.values():
            _drop_data_names(item)
    elif isinstance(value, list):
        for item in value:
            _drop_data_names(item)


def _compare_sides(ctx: RunContext, root: str, thresholds: dict[str, float], task: str) -> Outcome:
    """Both sides' dumps and losses are in ``root``: compare them, judge, and say."""
    spec = ctx.spec
    summary: dict[str, Any] = {"mode": task, "thresholds": thresholds}
    summary["dump_bytes"] = {
        side: _tree_bytes(os.path.join(root, side, DUMP_DIR)) for side in SIDES
    }
    summary["loss"] = _loss(ctx, root, thresholds["loss_rtol"])
    steps = [_step_dir(root, side) for side in SIDES]
    if not all(steps):
        if summary["loss"]["steps"]:
            # A script without probe(): loss-curve parity only.
            return _verdict(summary, None, [])
        return Outcome(
            exits.FAILED,
            "neither a dump nor a loss to compare: the script calls neither "
            "parity.probe() nor parity.log_loss()",
            summary,
            NOT_COMPARABLE,
        )
    try:
        rows = _compare(ctx, root, steps[0], steps[1], thresholds, task == STATISTICS)
    except CompareFailed as exc:
        return Outcome(exits.FAILED, str(exc), summary, NOT_COMPARABLE)
    if spec["int8"]:
        failed = _int8(ctx, root, summary)
        if failed:
            return Outcome(exits.FAILED, failed, summary, SIDE_FAILED)
    return _verdict(summary, first_divergent(rows), rows)


def _int8(ctx: RunContext, root: str, summary: dict[str, Any]) -> str:
    """The INT8 pass: the script once more, float32 on the CPU, where its
    ``parity.int8_check`` writes the report; '' when it ran, else why not."""
    failed = _run_side(ctx, root, INT8_SIDE, "")
    if failed:
        return f"the INT8 pass failed: {failed}"
    path = os.path.join(root, INT8_SIDE, INT8_FILE)
    if not os.path.exists(path):
        return "the INT8 pass wrote no report: the script does not call parity.int8_check()"
    with open(path) as handle:
        summary["int8"] = json.load(handle)
    return ""


def _existing(ctx: RunContext, root: str, thresholds: dict[str, float]) -> Outcome:
    """Parity of two dumps that exist: the same comparison, no script run."""
    steps = [os.path.join(ctx.run_dir, ctx.spec[f"dump_{side}"]) for side in SIDES]
    summary: dict[str, Any] = {"mode": "existing dumps", "thresholds": thresholds}
    summary["loss"] = loss_parity({}, {}, thresholds["loss_rtol"])
    for side, step in zip(SIDES, steps):
        if not os.path.isdir(step):
            reason = f"dump_{side}: {step} is no directory on this host"
            return Outcome(exits.FAILED, reason, summary, NOT_COMPARABLE)
    statistics = _summary_only(steps[0]) or _summary_only(steps[1])
    summary["mode"] = STATISTICS if statistics else TENSOR
    try:
        rows = _compare(ctx, root, steps[0], steps[1], thresholds, statistics)
    except CompareFailed as exc:
        return Outcome(exits.FAILED, str(exc), summary, NOT_COMPARABLE)
    return _verdict(summary, first_divergent(rows), rows)


def _summary_only(step: str) -> bool:
    """Whether a dump holds statistics only (msprobe's dump.json says its task)."""
    for path in glob.glob(os.path.join(step, "*", "dump.json")):
        try:
            with open(path) as handle:
                return json.load(handle).get("task") == STATISTICS
        except (OSError, ValueError):
            return False
    return False


class CompareFailed(Exception):
    """msprobe could not compare the dumps; the message says why."""


def _run_side(ctx: RunContext, root: str, side: str, task: str) -> str:
    """Run the script as ``side``; '' when it exited 0, else why it failed."""
    return _ended(_start_side(ctx, root, side, task))


def _start_side(ctx: RunContext, root: str, side: str, task: str) -> subprocess.Popen:
    """The script started as ``side``, its dump and losses going to ``root``/``side``."""
    spec = ctx.spec
    # The INT8 pass is float32 on the CPU, whatever the sides are.
    values = spec[side] if side in SIDES else INT8_PASS
    directory = os.path.join(root, side)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    env = dict(os.environ)
    env.update(values["env"])
    env.update(
        {
            script_env.RUN_DIR: ctx.run_dir,
            script_env.PARITY_SIDE: side,
            script_env.PARITY_DIR: directory,
            script_env.PARITY_DTYPE: values["dtype"],
            script_env.PARITY_AMP_LEVEL: values["amp_level"],
            script_env.PARITY_STEPS: str(spec["steps"]),
            script_env.PARITY_LEVEL: spec["level"],
            script_env.PARITY_DUMP_TASK: task,
            script_env.PARITY_LAYERS: str(spec["layers"]),
            script_env.DEVICE_TYPE: values["device_type"] or spec["device_type"],
            script_env.SEED: str(spec["seed"]),
        }
    )
    entry = spec["entry"]
    if entry == BUILTIN_MLP:
        command = [sys.executable, "-m", "workers.parity.builtin"]
    elif entry.endswith(".py"):
        command = [sys.executable, os.path.join(ctx.run_dir, entry)]
    else:
        module, _, function = entry.partition(":")
        command = [sys.executable, "-c", f"import {module}; {module}.{function}()"]
    command += spec["args"]
    ctx.say(
        f"parity: side {side} ({env[script_env.DEVICE_TYPE]}, {values['dtype']}, "
        f"{values['amp_level']}, {task} dump)"
    )
    ctx.events.flush()
    return subprocess.Popen(command, cwd=ctx.run_dir, env=env, stderr=subprocess.PIPE)


def _ended(process: subprocess.Popen) -> str:
    """Wait for a side's process: '' when it exited 0, else why it failed."""
    _, raw = process.communicate()
    stderr = raw.decode("utf-8", "replace")[-STDERR_TAIL_CHARS:]
    sys.stderr.write(stderr)
    sys.stderr.flush()
    if process.returncode == 0:
        return ""
    line = exception_line(stderr.splitlines())
    return line or f"the script exited with code {process.returncode}"


def _tree_bytes(path: str) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(folder, name))
    return total


def _step_dir(root: str, side: str) -> str:
    found = sorted(glob.glob(os.path.join(root, side, DUMP_DIR, "step0")))
    return found[0] if found else ""


def _loss(ctx: RunContext, root: str, rtol: float) -> dict[str, Any]:
    curves = {}
    for side in SIDES:
        points: dict[int, float | None] = {}
        path = os.path.join(root, side, LOSS_FILE)
        if os.path.exists(path):
            with open(path) as handle:
                for line in handle:
                    point = json.loads(line)
                    points[int(point["step"])] = point["value"]
        curves[side] = points
        finite = {step: value for step, value in points.items() if value is not None}
        for step, value in sorted(finite.items()):
            ctx.events.metric(LOSS_KEY.format(side=side), step, value)
    return loss_parity(curves["a"], curves["b"], rtol)


def _compare(
    ctx: RunContext,
    root: str,
    step_a: str,
    step_b: str,
    thresholds: dict[str, float],
    statistics: bool,
) -> list[dict[str, Any]]:
    """msprobe's compare of side b (its "NPU") against side a (its "bench"), judged."""
    out = os.path.join(root, "compare")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    command = [sys.executable, "-c", MSPROBE_COMPARE, "compare"]
    command += ["-tp", step_b, "-gp", step_a, "-o", out]
    process = subprocess.run(command, cwd=ctx.run_dir, capture_output=True, check=False)
    sys.stderr.write(process.stderr.decode("utf-8", "replace")[-STDERR_TAIL_CHARS:])
    found = sorted(glob.glob(os.path.join(out, "**", "*.csv"), recursive=True))
    if process.returncode != 0 or not found:
        tail = (process.stdout + process.stderr).decode("utf-8", "replace").strip()
        last = tail.splitlines()[-1] if tail else f"exit code {process.returncode}"
        if "No module named" in tail and "msprobe" in tail:
            last = "msprobe (mindstudio-probe) is not installed in the run's interpreter"
        raise CompareFailed(f"msprobe compare failed: {last}")
    script = ctx.spec["entry"] if ctx.spec["entry"].endswith(".py") else ""
    stacks = _stacks(step_b)
    rows = []
    for index, cells in enumerate(_csv_rows(found[0])):
        if index >= MAX_LAYERS:
            break
        row = judge(cells, thresholds, statistics)
        row["index"] = index
        row["stack"] = script_frames(stack_of(stacks, row["name"]), os.path.basename(script))[:5]
        ctx.events.emit(LAYER, **{key: row[key] for key in LAYER_FIELDS})
        rows.append(row)
    return rows


def _stacks(step: str) -> dict[str, list[str]]:
    """Side b's call stacks by API or module call (msprobe's stack.json: id -> [[names],
    [frames]]), each frame as ``path:line in function: code``."""
    stacks: dict[str, list[str]] = {}
    for path in glob.glob(os.path.join(step, "*", "stack.json")):
        try:
            with open(path) as handle:
                found = json.load(handle)
        except (OSError, ValueError):
            continue
        for entry in found.values() if isinstance(found, dict) else ():
            if not (isinstance(entry, list) and len(entry) == 2):
                continue
            frames = [_frame(str(frame)) for frame in entry[1]]
            for name in entry[0]:
                stacks[str(name)] = frames
    return stacks


def _frame(text: str) -> str:
    # "File PATH, line N, in FUNC, \n CODE"
    head, _, code = text.partition("\n")
    parts = [part.strip() for part in head.split(",")]
    if len(parts) >= 3 and parts[0].startswith("File "):
        line = parts[1].replace("line ", "")
        function = parts[2].replace("in ", "")
        return f"{parts[0][5:]}:{line} in {function}: {code.strip()}"
    return text.strip()


def _csv_rows(path: str) -> list[dict[str, Any]]:
    with open(path, newline="", encoding="utf-8-sig") as handle:
        return [row for row in csv.DictReader(handle) if any(row.values())]


def _verdict(
    summary: dict[str, Any], first: dict[str, Any] | None, rows: list[dict[str, Any]]
) -> Outcome:
    summary["layers"] = len(rows)
    summary["broken_layers"] = sum(1 for row in rows if row["broken"])
    summary["nan_layers"] = sum(1 for row in rows if row["nan"])
    if rows:
        cosines = [row["cosine"] for row in rows if row["cosine"] is not None]
        summary["min_cosine"] = min(cosines) if cosines else None
    summary["first_divergent"] = (
        {key: first[key] for key in ("name", "cosine", "max_abs_err", "max_rel_err", "stack")}
        if first
        else None
    )
    loss = summary["loss"]
    if first is not None and BROKE_SHAPE in first["broken"]:
        return Outcome(
            exits.FAILED,
            f"{first['name']}: shape {first['shape_b']} on side b, {first['shape_a']} on side a",
            summary,
            SHAPE_MISMATCH,
        )
    if first is not None:
        return Outcome(
            exits.FAILED,
            f"first divergent layer: {first['name']} (breaks {', '.join(first['broken'])})",
            summary,
            DIVERGED,
        )
    int8 = summary.get("int8")
    if int8 and int8.get("delta_kept") is not None and int8["delta_kept"] < -int8["tolerance"]:
        return Outcome(
            exits.FAILED,
            f"INT8: the metric falls {-int8['delta_kept']:g} below float32's even with "
            f"{len(int8['keep'])} layer(s) kept in float32",
            summary,
            DIVERGED,
        )
    if loss["first_step_past_tolerance"] is not None:
        return Outcome(
            exits.FAILED,
            f"loss differs by more than {loss['tolerance']:g} from step "
            f"{loss['first_step_past_tolerance']}",
            summary,
            DIVERGED,
        )
    return Outcome(exits.SUCCEEDED, f"{len(rows)} layers within the thresholds", summary)
