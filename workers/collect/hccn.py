"""hccn_tool, Ascend's tool for the NPUs' own network ports (RoCE), as the gang checks use it.

``-i N`` names a device by its physical id: the tool turns it into the logical id itself
(``dsmi_get_logicid_from_phyid``, hccn_tool/cmd.c). Callers pass the physical id
(workers.contract.gang.physical_id), which in a container mapping a subset of the host's
devices is not the logical index the runs count in.

What it prints (tests/fixtures/hccn_tool/README.md names the captures and the source):

- ``-ip -g``: ``ipaddr:…`` and ``netmask:…`` lines; a device without an address
  exits 13 with ``Get ipconf failed, because no ip was preset there!`` on stderr;
- ``-link -g``: ``link status: UP`` (or ``DOWN``);
- ``-ping -g address A``: ``device N PING A``, a ``recv seq=…`` or ``recv time out
  seq=…`` line per packet, then ``N packets transmitted, M received, L% packet loss``
  (``packets loss`` in some drivers). A packet lost makes the tool exit non-zero
  (``Command execute failed!`` on stderr) after printing all that;
- ``-hccs_ping -g sdid S`` (Atlas A3 super pod boards: a ping over HCCS to the device of
  SDID ``S`` in the same super pod): ``device N PING A``, per packet ``This pkt ping
  success!`` (or why not) and ``recv seq …``, then ``N packets transmitted, M received,
  L% packets loss`` and the times; on a board without super pods it prints ``The command
  is not supported on this product.`` and exits 13;
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
# What -hccs_ping says on a board that has no super pods (UDA_TOOL_CMD_UNSUPPORT_ON_PRODUCT_ERR).
HCCS_UNSUPPORTED = "The command is not supported on this product."
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


def device_ips(phy_ids: list[int]) -> dict[int, str]:
    """Each device's IP by its physical id, for the ones that have one; {} where hccn_tool
    is missing."""
    ips: dict[int, str] = {}
    for phy_id in phy_ids:
        try:
            ip = parse_ip(run(["-i", str(phy_id), "-ip", "-g"]))
        except HccnError:
            continue
        if ip:
            ips[phy_id] = ip
    return ips


def link(phy_id: int) -> str:
    return parse_link(run(["-i", str(phy_id), "-link", "-g"]))


def ping(phy_id: int, address: str) -> tuple:
    """(transmitted, received) of a RoCE ping."""
    args = ["-i", str(phy_id), "-ping", "-g", "address", address]
    return _parse_ping_done(args, call(args))


def hccs_ping(phy_id: int, sdid: int) -> tuple | None:
    """(transmitted, received) of a ping over HCCS to the device of SDID ``sdid`` in this
    device's super pod; None on a board hccn_tool runs no HCCS ping on."""
    args = ["-i", str(phy_id), "-hccs_ping", "-g", "sdid", str(sdid)]
    done = call(args)
    if done.code != 0 and HCCS_UNSUPPORTED in done.stdout + done.stderr:
        return None
    return _parse_ping_done(args, done)


def _parse_ping_done(args: list[str], done: Done) -> tuple:
    """A lost packet makes hccn_tool exit non-zero after it has printed the packets: those
    are the answer, the exit code is not."""
    try:
        return parse_ping(done.stdout)
    except HccnError:
        if done.code != 0:
            raise failure(args, done) from None
        raise
