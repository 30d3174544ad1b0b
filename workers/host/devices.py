"""Which accelerators this host has, found without importing torch."""

from __future__ import annotations

import logging
import shutil
import subprocess
from typing import Any, Dict

from workers.backends.cpu import cpu_model_name
from workers.collect import hccn, superpod
from workers.collect.npu_smi import NpuSmiParseError, parse_chip_mapping
from workers.contract.gang import DEVICE_IP, DEVICE_PHY_ID, DEVICE_SDID, DEVICE_SUPER_POD_ID

Device = Dict[str, Any]
log = logging.getLogger(__name__)


class DeviceDetectionError(RuntimeError):
    """The host's devices could not be found; the message says what to set instead."""


def detect(device_type: str | None, count: int | None) -> tuple[str, list[Device]]:
    """The device type and devices to register: as configured, else found on the host.

    With no type configured, an NPU host is one with ``npu-smi`` and a GPU
    host one with ``nvidia-smi``; anything else offers its CPU.
    """
    if device_type is None:
        if shutil.which("npu-smi"):
            device_type = "npu"
        elif shutil.which("nvidia-smi"):
            device_type = "cuda"
        else:
            device_type = "cpu"
    if device_type == "cpu":
        devices = [{"index": 0, "name": cpu_model_name()}]
    elif device_type == "npu":
        devices = _npu_devices() if count is None else []
    elif device_type == "cuda":
        devices = _cuda_devices() if count is None else []
    else:
        raise DeviceDetectionError(f"unknown device type {device_type!r}")
    if count is not None:
        known = {device["index"]: device for device in devices}
        devices = [known.get(index, {"index": index, "name": ""}) for index in range(count)]
    return device_type, devices


def _npu_devices() -> list[Device]:
    output = _run(["npu-smi", "info", "-m"])
    try:
        rows = parse_chip_mapping(output)
    except NpuSmiParseError as exc:
        raise DeviceDetectionError(f"npu-smi info -m: {exc}; set the device count") from exc
    devices = []
    for row in rows:
        # Mcu rows have no logic id: they are not devices torch can use.
        if row["logic_id"] is None:
            continue
        device: Device = {
            "index": row["logic_id"],
            "name": row["name"],
            "npu": row["npu"],
            "chip": row["chip"],
        }
        # The physical id where npu-smi prints one (Atlas A3, Ascend 950); without it the
        # device goes by its logical index, which the host page says.
        if row["phy_id"] is not None:
            device[DEVICE_PHY_ID] = row["phy_id"]
        devices.append(device)
    # Each device's own network port's address (hccn_tool, asked by physical id), for the
    # rank tables of runs across hosts; a host without hccn_tool registers none.
    ips = hccn.device_ips([device.get(DEVICE_PHY_ID, device["index"]) for device in devices])
    for device in devices:
        ip = ips.get(device.get(DEVICE_PHY_ID, device["index"]))
        if ip:
            device[DEVICE_IP] = ip
    # On Atlas A3, each chip's place in its super pod, for a rank table of version 1.2; a
    # host without super pods registers none.
    pods, errors = superpod.super_pods(
        [(device["index"], device["npu"], device["chip"]) for device in devices]
    )
    for error in errors:
        log.warning("no super pod id for a device: %s", error)
    for device in devices:
        if device["index"] in pods:
            device[DEVICE_SDID], device[DEVICE_SUPER_POD_ID] = pods[device["index"]]
    return devices


def _cuda_devices() -> list[Device]:
    output = _run(
        ["nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"]
    )
    devices = []
    for line in output.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit():
            memory = int(parts[2]) if parts[2].isdigit() else None
            devices.append({"index": int(parts[0]), "name": parts[1], "memory_mb": memory})
    return devices


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DeviceDetectionError(f"{argv[0]} failed: {exc}; set the device count") from exc
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise DeviceDetectionError(
            f"{' '.join(argv)} exited with {done.returncode}: {message[0]}; set the device count"
        )
    return done.stdout
