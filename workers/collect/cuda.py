"""NVIDIA GPUs, when the host has them: the same platform serves GPU hosts."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

QUERY = "index,name,uuid,pci.bus_id,driver_version,memory.total"


def collect_cuda() -> dict[str, Any]:
    if not shutil.which("nvidia-smi"):
        return {"present": False}
    done = subprocess.run(
        ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()
        return {"present": True, "error": message[-1] if message else f"exit {done.returncode}"}
    return {"present": True, **parse_gpu_query(done.stdout)}


def parse_gpu_query(text: str) -> dict[str, Any]:
    gpus = []
    drivers = set()
    for line in text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 6 or not parts[0].isdigit():
            continue
        index, name, uuid, bus_id, driver, memory = parts
        drivers.add(driver)
        gpus.append(
            {
                "index": int(index),
                "name": name,
                "uuid": uuid,
                "bus_id": bus_id,
                "memory_total_mb": int(memory) if memory.isdigit() else None,
            }
        )
    return {"driver_version": ", ".join(sorted(drivers)) or None, "gpus": gpus}
