"""Assemble one environment snapshot of this host, as the running interpreter sees it.

Every section records its own error instead of failing the snapshot: a CPU
host has no npu-smi and no /usr/local/Ascend, and that is a finding, not a
crash. The document's shape is read by the platform (npulab.snapshots).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Any, Callable

from workers import __version__
from workers.collect.ascend import DEFAULT_ETC, DEFAULT_ROOT, find_cann, read_driver, read_firmware
from workers.collect.cuda import collect_cuda
from workers.collect.doctor import diagnose
from workers.collect.environment import collect_env
from workers.collect.npu_smi import NpuSmiParseError, identify_chips, parse_chip_mapping, parse_info
from workers.collect.python_env import collect_python
from workers.collect.system import collect_host
from workers.contract.compat import check_stack, pair_verdicts
from workers.contract.diagnosis import ERROR_TABLES
from workers.diagnosis.cann_tables import find_tables, toolkit_roots

SCHEMA = 1
NPU_SMI_TIMEOUT_S = 60


def collect(
    ascend_root: str = DEFAULT_ROOT,
    etc_dir: str = DEFAULT_ETC,
    npu_smi_output: str | None = None,
    probe_torch_npu: bool = True,
) -> dict[str, Any]:
    started = time.monotonic()
    snapshot: dict[str, Any] = {
        "schema": SCHEMA,
        "collected_at": time.time(),
        "collector": {"version": __version__},
        "host": _section(collect_host),
        "npu": _section(collect_npu, npu_smi_output),
        "ascend": _section(collect_ascend, ascend_root, etc_dir),
        "python": _section(collect_python, probe_torch_npu),
        "env": _section(lambda: {"vars": collect_env()}),
        "cuda": _section(collect_cuda),
    }
    snapshot["findings"] = diagnose(snapshot)
    snapshot["collector"]["seconds"] = round(time.monotonic() - started, 3)
    return snapshot


def collect_npu(npu_smi_output: str | None = None) -> dict[str, Any]:
    """``npu-smi info`` parsed (from a saved capture when given), with ``-m`` when it runs."""
    mapping = None
    if npu_smi_output:
        with open(npu_smi_output, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
        source = npu_smi_output
    elif shutil.which("npu-smi"):
        text, error = _run(["npu-smi", "info"])
        if error:
            return {"present": True, "info_error": error}
        source = "npu-smi info"
        mapping_text, mapping_error = _run(["npu-smi", "info", "-m"])
        if not mapping_error:
            try:
                mapping = parse_chip_mapping(mapping_text)
            except NpuSmiParseError:
                mapping = None
    else:
        return {"present": False}
    try:
        info = parse_info(text)
    except NpuSmiParseError as exc:
        return {"present": True, "source": source, "info_error": str(exc)}
    return {
        "present": True,
        "source": source,
        **info,
        "mapping": mapping,
        "identity": identify_chips(info, mapping),
    }


def collect_ascend(root: str = DEFAULT_ROOT, etc_dir: str = DEFAULT_ETC) -> dict[str, Any]:
    driver = read_driver(root)
    firmware = read_firmware(root)
    cann = find_cann(root, etc_dir)
    return {
        "root": root,
        "driver": driver,
        "firmware": firmware,
        "cann": cann,
        # Where the toolkit's error manager keeps its code tables (read by each run's
        # diagnosis, never copied: workers.diagnosis.cann_tables).
        ERROR_TABLES: find_tables(toolkit_roots(root)),
        "compatibility": pair_verdicts(check_stack(driver, firmware, cann)),
    }


def _section(collector: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    try:
        return collector(*args)
    except Exception as exc:  # one broken section must not cost the whole snapshot
        return {"error": f"{type(exc).__name__}: {exc}"}


def _run(argv: list[str]) -> tuple[str, str | None]:
    """(stdout, None) or ("", why it failed)."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=NPU_SMI_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "", f"{' '.join(argv)}: {exc}"
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return "", f"{' '.join(argv)} exited with {done.returncode}: " + (
            lines[-1] if lines else "no output"
        )
    return done.stdout, None
