"""Which super pod each Atlas A3 chip sits in, from ``npu-smi info -t spod-info``.

``npu-smi info -t spod-info -i NPU -c CHIP`` prints ``key : value`` lines (``SDID``,
``Super Pod Size``, ``Super Pod ID``, ``Server Index``), each key padded to 30 characters
after a tab; on hardware without super pods it prints ``This device does not support
querying spod-info.`` and exits 0 (tests/fixtures/spod_info/README.md names the sources).
The SDID (``super_device_id``) and the Super Pod ID go into an HCCL rank table of version
1.2 (workers.contract.gang.rank_table). Standard library only.
"""

from __future__ import annotations

import subprocess

TOOL = "npu-smi"
TIMEOUT_S = 20.0
NOT_SUPPORTED = "does not support querying spod-info"
SDID = "SDID"
SUPER_POD_ID = "Super Pod ID"


class SuperPodError(RuntimeError):
    """npu-smi failed, or printed what spod-info never prints."""


def parse_spod_info(text: str) -> dict[str, int] | None:
    """Every ``key : value`` line of ``-t spod-info`` with a whole-number value, by key as
    printed; None where the hardware has no super pods."""
    if NOT_SUPPORTED in text:
        return None
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and value.strip().isdigit():
            values[key.strip()] = int(value.strip())
    if SDID not in values or SUPER_POD_ID not in values:
        raise SuperPodError(f"no SDID and Super Pod ID in: {text.strip()[:200]!r}")
    return values


def read(npu: int, chip: int) -> dict[str, int] | None:
    """One chip's spod-info (``parse_spod_info``); SuperPodError where npu-smi failed."""
    argv = [TOOL, "info", "-t", "spod-info", "-i", str(npu), "-c", str(chip)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SuperPodError(f"{' '.join(argv)}: {exc}") from exc
    if done.returncode != 0:
        detail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise SuperPodError(f"{' '.join(argv)} exited with {done.returncode}: {detail[0]}")
    return parse_spod_info(done.stdout)


def super_pods(chips: list[tuple[int, int, int]]) -> tuple[dict[int, tuple[int, int]], list[str]]:
    """(device index -> (SDID, Super Pod ID), what failed) for ``(index, npu, chip)`` triples.

    All chips of a host are one generation: the first that has no super pods ends the
    queries. A chip whose query failed is left out, and said in the second item.
    """
    found: dict[int, tuple[int, int]] = {}
    errors: list[str] = []
    for index, npu, chip in chips:
        try:
            values = read(npu, chip)
        except SuperPodError as exc:
            errors.append(str(exc))
            continue
        if values is None:
            break
        found[index] = (values[SDID], values[SUPER_POD_ID])
    return found, errors
