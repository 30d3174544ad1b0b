"""hccn_tool, Ascend's tool for the NPUs' own network ports (RoCE), as the gang checks use it.

``hccn_tool -i N -ip -g`` prints ``ipaddr:…`` and ``netmask:…`` lines, ``-link -g``
prints ``link status: UP`` (or DOWN), and ``-ping -g address A`` ends with ping's
``N packets transmitted, M received, L% packet loss`` line. Standard library only.
"""

from __future__ import annotations

import re
import shutil
import subprocess

TOOL = "hccn_tool"
TIMEOUT_S = 20.0
_PING_SUMMARY = re.compile(r"(\d+) packets transmitted, (\d+) received")


class HccnError(RuntimeError):
    """hccn_tool is missing, failed, or printed what it never prints."""


def run(args: list[str]) -> str:
    if shutil.which(TOOL) is None:
        raise HccnError(f"{TOOL} is not on PATH (it is in the driver's tools directory)")
    try:
        done = subprocess.run(
            [TOOL, *args], capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise HccnError(
            f"{TOOL} {' '.join(args)} did not answer within {TIMEOUT_S:.0f} s"
        ) from None
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise HccnError(
            f"{TOOL} {' '.join(args)} exited with {done.returncode}"
            + (f": {detail[-1]}" if detail else "")
        )
    return done.stdout


def parse_ip(output: str) -> str | None:
    """The device's IP from ``-ip -g`` (``ipaddr:192.168.100.101``), or None if it has none."""
    for line in output.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() == "ipaddr" and value.strip():
            return value.strip()
    return None


def parse_link(output: str) -> str:
    """``UP``, ``DOWN`` ... from ``-link -g``; HccnError if there is no such line."""
    for line in output.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() == "link status":
            return value.strip().upper()
    raise HccnError(f"no 'link status' line in: {output.strip()[:200]!r}")


def parse_ping(output: str) -> tuple:
    """(transmitted, received) from ``-ping -g address A``."""
    found = _PING_SUMMARY.search(output)
    if not found:
        raise HccnError(f"no ping summary in: {output.strip()[:200]!r}")
    return int(found.group(1)), int(found.group(2))


def device_ips(indices: list[int]) -> dict[int, str]:
    """Each device's IP, for the ones that have one; {} where hccn_tool is missing."""
    ips: dict[int, str] = {}
    for index in indices:
        try:
            ip = parse_ip(run(["-i", str(index), "-ip", "-g"]))
        except HccnError:
            continue
        if ip:
            ips[index] = ip
    return ips


def link(index: int) -> str:
    return parse_link(run(["-i", str(index), "-link", "-g"]))


def ping(index: int, address: str) -> tuple:
    return parse_ping(run(["-i", str(index), "-ping", "-g", "address", address]))
