"""hccn_tool, Ascend's tool for the NPUs' own network ports (RoCE), as the gang checks use it.

What it prints (tests/fixtures/hccn_tool/README.md names the captures and the source):

- ``-ip -g``: ``ipaddr:…`` and ``netmask:…`` lines; a device without an address
  exits 13 with ``Get ipconf failed, because no ip was preset there!`` on stderr;
- ``-link -g``: ``link status: UP`` (or ``DOWN``);
- ``-ping -g address A``: ``device N PING A``, a ``recv seq=…`` or ``recv time out
  seq=…`` line per packet, then ``N packets transmitted, M received, L% packet loss``
  (``packets loss`` in some drivers). A packet lost makes the tool exit non-zero
  (``Command execute failed!`` on stderr) after printing all that;
- its own failures: one line, on stderr (``Get invalid device id.``, ``Execute
  failed: Link status is down.``) or, for some, stdout (``hccn_tool is busy, please
  try again.``), and a non-zero exit.

Standard library only.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import NamedTuple

TOOL = "hccn_tool"
TIMEOUT_S = 20.0
_PING_SUMMARY = re.compile(r"(\d+) packets transmitted, (\d+) received")
# One line per packet when no summary came (a real capture shows ``seq=O`` for ``seq=0``).
_PING_RECEIVED = re.compile(r"^\s*recv seq\b", re.MULTILINE)
_PING_LOST = re.compile(r"^\s*recv time out seq\b|Destination Host Unreachable", re.MULTILINE)


class HccnError(RuntimeError):
    """hccn_tool is missing, failed, or printed what it never prints."""


class Done(NamedTuple):
    code: int
    stdout: str
    stderr: str


def call(args: list[str]) -> Done:
    """hccn_tool's exit code and output; HccnError only where it did not run to an end."""
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
    return Done(done.returncode, done.stdout, done.stderr)


def failure(args: list[str], done: Done) -> HccnError:
    """The error for a non-zero exit, ending with the tool's own last line."""
    detail = (done.stderr.strip() or done.stdout.strip()).splitlines()
    return HccnError(
        f"{TOOL} {' '.join(args)} exited with {done.code}" + (f": {detail[-1]}" if detail else "")
    )


def run(args: list[str]) -> str:
    done = call(args)
    if done.code != 0:
        raise failure(args, done)
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
    """(transmitted, received) from ``-ping -g address A``: its summary line, or, without
    one, its per-packet lines."""
    found = _PING_SUMMARY.search(output)
    if found:
        return int(found.group(1)), int(found.group(2))
    received = len(_PING_RECEIVED.findall(output))
    lost = len(_PING_LOST.findall(output))
    if received + lost == 0:
        raise HccnError(f"no ping summary in: {output.strip()[:200]!r}")
    return received + lost, received


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
    """(transmitted, received). A lost packet makes hccn_tool exit non-zero after it has
    printed the packets: those are the answer, the exit code is not."""
    args = ["-i", str(index), "-ping", "-g", "address", address]
    done = call(args)
    try:
        return parse_ping(done.stdout)
    except HccnError:
        if done.code != 0:
            raise failure(args, done) from None
        raise
