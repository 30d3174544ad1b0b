"""The host itself: OS, kernel, CPU, memory."""

from __future__ import annotations

import os
import platform
import socket
from typing import Any

from workers.backends.cpu import cpu_model_name


def collect_host(os_release_path: str = "/etc/os-release") -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "os": read_os_release(os_release_path),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "cpu": {"model": cpu_model_name(), "count": os.cpu_count()},
        "memory_mb": _memory_mb(),
    }


def read_os_release(path: str = "/etc/os-release") -> dict[str, Any]:
    """ID, VERSION_ID and PRETTY_NAME of os-release(5); empty where the file is missing."""
    fields: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, sep, value = line.strip().partition("=")
                if sep:
                    fields[key] = value.strip().strip('"').strip("'")
    except OSError:
        pass
    return {
        "id": fields.get("ID"),
        "version": fields.get("VERSION_ID"),
        "name": fields.get("PRETTY_NAME") or fields.get("NAME"),
    }


def _memory_mb() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
