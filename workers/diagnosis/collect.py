"""What the host collects into a failed run's directory: the proof beside the diagnosis.

The run's plogs already land in its directory (``ASCEND_PROCESS_LOG_PATH``); this
keeps them bounded (newest kept) and adds kernel messages about the NPU devices
since the run started (where ``dmesg`` is readable), ``npu-smi`` health of the
run's devices, and on a hang each process's Python stack (``py-spy``, the worker's
optional dependency). Every tool is optional and bounded in time and size.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import time
from typing import Iterable, Sequence

from workers.contract.diagnosis import COLLECT_LIMIT_BYTES, COLLECTED_DIR

TOOL_TIMEOUT_S = 20
MAX_TOOL_OUTPUT = 1024 * 1024
# Kernel lines about the NPU driver and its devices.
_NPU_KERNEL = re.compile(r"davinci|devdrv|npu|hisi|ascend|hccn|drv_|svm|tsdrv", re.IGNORECASE)


def collected_dir(run_dir: str) -> str:
    path = os.path.join(run_dir, COLLECTED_DIR)
    os.makedirs(path, exist_ok=True)
    return path


def bound_directory(directory: str, limit: int = COLLECT_LIMIT_BYTES) -> list[str]:
    """Delete the oldest files under ``directory`` until it holds at most ``limit`` bytes;
    returns what was removed."""
    files = []
    for root, _dirs, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            try:
                stat = os.lstat(path)
            except OSError:
                continue
            files.append((stat.st_mtime, stat.st_size, path))
    total = sum(size for _m, size, _p in files)
    removed = []
    for _mtime, size, path in sorted(files):
        if total <= limit:
            break
        try:
            os.unlink(path)
        except OSError:
            continue
        total -= size
        removed.append(path)
    return removed


def _run_tool(argv: Sequence[str]) -> str:
    if shutil.which(argv[0]) is None:
        return ""
    try:
        done = subprocess.run(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=TOOL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{argv[0]}: {exc}\n"
    return done.stdout[:MAX_TOOL_OUTPUT].decode("utf-8", errors="replace")


def kernel_messages(since: float) -> str:
    """NPU-related kernel lines since ``since`` (Unix time); "" where dmesg is not readable."""
    text = _run_tool(
        [
            "dmesg",
            "--time-format",
            "iso",
            "--since",
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)),
        ]
    )
    if not text or "Operation not permitted" in text:
        return ""
    return "".join(line + "\n" for line in text.splitlines() if _NPU_KERNEL.search(line))


def npu_health(devices: Iterable[int]) -> str:
    """``npu-smi info -t health -i N`` for each of the run's devices ("" without npu-smi)."""
    parts = []
    for device in devices:
        out = _run_tool(["npu-smi", "info", "-t", "health", "-i", str(device)])
        if out:
            parts.append(f"== npu-smi info -t health -i {device}\n{out}")
    return "".join(parts)


def python_stacks(pids: Iterable[int]) -> str:
    """Each process's Python stack by py-spy (optional: "" when it is not installed)."""
    if shutil.which("py-spy") is None:
        return ""
    parts = []
    for pid in pids:
        parts.append(
            f"== py-spy dump --pid {pid}\n" + _run_tool(["py-spy", "dump", "--pid", str(pid)])
        )
    return "".join(parts)


def processes_in_groups(groups: Iterable[int]) -> list[int]:
    """Live pids whose process group is one of ``groups`` (Linux /proc)."""
    wanted = set(groups)
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read().decode("ascii", errors="replace")
        except OSError:
            continue
        # The command sits in parentheses and may hold spaces; the fields follow it.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) in wanted:
            found.append(int(name))
    return sorted(found)


def write(run_dir: str, name: str, text: str) -> str:
    """Keep ``text`` as ``diagnosis/NAME`` in the run directory; returns its path ("" if empty)."""
    if not text:
        return ""
    path = os.path.join(collected_dir(run_dir), name)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


COLLECTED_ARCHIVE = "collected.tar.gz"


def pack(run_dir: str, plog_dir: str, limit: int = COLLECT_LIMIT_BYTES) -> str:
    """The collected files and the run's plogs in one archive for upload (newest first,
    at most ``limit`` bytes before compression); its path, or "" when there is nothing."""
    here = collected_dir(run_dir)
    target = os.path.join(here, COLLECTED_ARCHIVE)
    members = []
    for directory, prefix in ((here, "diagnosis"), (plog_dir, "ascend_log")):
        if not os.path.isdir(directory):
            continue
        for root, _dirs, names in os.walk(directory):
            for name in names:
                path = os.path.join(root, name)
                if path == target or os.path.islink(path) or not os.path.isfile(path):
                    continue
                stat = os.stat(path)
                arcname = os.path.join(prefix, os.path.relpath(path, directory))
                members.append((stat.st_mtime, stat.st_size, path, arcname))
    if not members:
        return ""
    total = 0
    with tarfile.open(target, "w:gz") as archive:
        for _mtime, size, path, arcname in sorted(members, reverse=True):
            if total + size > limit:
                continue
            total += size
            archive.add(path, arcname=arcname)
    return target


def collect_on_failure(
    run_dir: str, plog_dir: str, since: float, devices: Iterable[int]
) -> list[str]:
    """Bound the plogs, add kernel messages and device health; the files written."""
    if os.path.isdir(plog_dir) and os.path.realpath(plog_dir).startswith(os.path.realpath(run_dir)):
        bound_directory(plog_dir)
    written = [
        write(run_dir, "dmesg.txt", kernel_messages(since)),
        write(run_dir, "npu-health.txt", npu_health(devices)),
    ]
    return [path for path in written if path]
