"""Ascend NPUs, through ``npu-smi``.

npu-smi is slow (a few hundred milliseconds to seconds a call, since every call
initialises the driver's management library), so what runs how often is chosen:

* every interval, one ``npu-smi info``: the whole table, for every chip at once
  (health, power, temperature, AICore %, HBM or DDR used/total, the processes);
* every ``SLOW_EVERY``-th interval, for at most ``SLOW_CHIPS`` chips in turn
  (round robin, so a 16-chip host is covered every few minutes): ``-t usages``
  (AICPU %, memory bandwidth %), ``-t ecc`` (single/double-bit errors, isolated
  pages), and, only for what the table does not show on this chip,
  ``-t power`` (310P prints ``NA``), ``-t temp`` and ``-t memory``; ``-t health``
  only for a chip whose table health is not OK, to log its error code;
* ``npu-smi info -m`` (logic ids) once, and again on slow intervals while it
  has not succeeded (the table's order stands in meanwhile).

Each slow reading goes into the sample of the interval it was read in, never
repeated in later ones. A failing or hanging tool gives samples with ``error``
set; a failing ``info`` skips the slow calls of that interval (they would fail
alike).
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any, Callable

from workers.collect.npu_smi import NpuSmiParseError, parse_chip_mapping, parse_info
from workers.contract import telemetry as contract
from workers.telemetry.tools import ToolFailed, ToolTimedOut, run_tool, telling_line

log = logging.getLogger("workers.telemetry")

TOOL = "npu-smi"
TOOL_TIMEOUT_S = 20.0
SLOW_EVERY = 6
SLOW_CHIPS = 4

_KEY_VALUE = re.compile(r"^\s*([^:#][^:]*?)\s*:\s*(.*?)\s*$")
_ERROR_LINE = re.compile(r"\bret is -?\d+|\bfailed\b|\berror\b", re.IGNORECASE)
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def parse_key_values(text: str) -> dict[str, str]:
    """``npu-smi info -t <type> -i N -c C`` output as {normalised key: value}.

    Keys are lower case with single blanks ("Aicore Usage Rate(%)" ->
    "aicore usage rate(%)"); the first occurrence of a key wins (``-t health -i N``
    repeats "Health" for the MCU after the chip). Lines starting with ``#`` are
    skipped. Raises NpuSmiParseError quoting the tool's complaint when there is
    no ``key : value`` line (a dcmi error instead of the output).
    """
    values: dict[str, str] = {}
    others: list[str] = []
    for raw in text.splitlines():
        if raw.lstrip().startswith("#"):
            continue
        match = _KEY_VALUE.match(raw)
        if match:
            key = " ".join(match.group(1).lower().split())
            values.setdefault(key, match.group(2))
        elif raw.strip():
            others.append(raw)
    if not values:
        if any(_ERROR_LINE.search(line) for line in others):
            raise NpuSmiParseError(f"npu-smi failed ({telling_line(chr(10).join(others))})")
        raise NpuSmiParseError("no 'key : value' lines: not `npu-smi info -t ...` output")
    return values


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    value = value.strip()
    return float(value) if _NUMBER.match(value) else None


def _first(values: dict[str, str], *keys: str) -> float | None:
    for key in keys:
        number = _number(values.get(key))
        if number is not None:
            return number
    return None


def usages_readings(values: dict[str, str]) -> dict[str, float]:
    """Readings of ``-t usages``: AICore and AICPU %, memory bandwidth %."""
    readings = {
        "utilization_pct": _first(values, "aicore usage rate(%)"),
        "aicpu_pct": _first(values, "aicpu usage rate(%)"),
        # HBM where the chip has it; "Memory" on 310B, whose memory is DDR only.
        "memory_bandwidth_pct": _first(
            values, "hbm bandwidth usage rate(%)", "memory bandwidth usage rate(%)"
        ),
    }
    return {name: value for name, value in readings.items() if value is not None}


def ecc_readings(values: dict[str, str]) -> dict[str, float]:
    """Readings of ``-t ecc``: error counts and isolated pages, DDR and HBM summed.

    Keys are matched by their words, since versions spell them differently
    ("Single-bit Error Count", "HBM Single Bit Error Count"); aggregate
    (lifetime) totals are left out so that a count means what the current one does.
    """
    sums: dict[str, float] = {}
    for key, value in values.items():
        words = key.replace("-", " ")
        number = _number(value)
        if number is None or "aggregate" in words:
            continue
        if "isolated page" in words:
            name = "retired_pages"
        elif "single bit" in words and "error" in words:
            name = "ecc_single_bit_errors"
        elif "double bit" in words and "error" in words:
            name = "ecc_double_bit_errors"
        else:
            continue
        sums[name] = sums.get(name, 0.0) + number
    return sums


def power_readings(values: dict[str, str]) -> dict[str, float]:
    """``-t power`` (and ``-t common``): the first "...power...(W)" value."""
    for key, value in values.items():
        number = _number(value)
        if "power" in key and key.endswith("(w)") and number is not None:
            return {"power_w": number}
    return {}


def temp_readings(values: dict[str, str]) -> dict[str, float]:
    """``-t temp`` (and ``-t common``): the chip's temperature, not HBM's or DDR's."""
    for key, value in values.items():
        number = _number(value)
        if "temp" in key and not key.startswith(("hbm", "ddr")) and number is not None:
            return {"temperature_c": number}
    return {}


def memory_readings(values: dict[str, str]) -> dict[str, float]:
    """``-t memory``: the device memory's size, HBM where it has any, else DDR."""
    for key in ("hbm capacity(mb)", "ddr capacity(mb)", "memory capacity(mb)"):
        number = _number(values.get(key))
        if number:
            return {"memory_total_mb": number}
    return {}


def health_detail(values: dict[str, str]) -> tuple[str, str]:
    """``-t health -i N -c C``: the health state and its error code, as printed."""
    state = health_state(values.get("health status") or values.get("health"))
    code = values.get("error code", "NA")
    information = values.get("error information", "NA")
    return state, f"error code {code}: {information}"


def health_state(value: str | None) -> str:
    """npu-smi's Health ("OK", "Warning", "Alarm", "Critical") as a contract state."""
    text = (value or "").strip().lower()
    if text == "ok":
        return contract.HEALTH_OK
    for word, state in (
        ("critical", contract.HEALTH_CRITICAL),
        ("alarm", contract.HEALTH_ALARM),
        ("warning", contract.HEALTH_WARNING),
    ):
        if word in text:
            return state
    return contract.HEALTH_UNKNOWN


def table_samples(
    info: dict[str, Any], when: float, logic_ids: dict[tuple[int, int], int], has_processes: bool
) -> dict[int, dict[str, Any]]:
    """``parse_info``'s table as one contract sample per chip, keyed by logic id.

    A chip's logic id is its ``Device`` column (310P layouts), else the
    ``npu-smi info -m`` mapping, else its place in the table (which is how
    logic ids are counted). ``has_processes``: the output had a process table,
    so a chip without rows there runs none (``process_count`` 0). Each sample
    carries a private ``_chip`` key, (NPU id, chip id), that the sampler uses for
    its per-chip queries and removes before it hands the sample on.
    """
    by_chip: dict[tuple[int, int], list[dict[str, Any]]] = {}
    first_chip: dict[int, int] = {}
    for chip in info["chips"]:
        first_chip.setdefault(chip["npu"], chip["chip"])
    for process in info["processes"]:
        key = (process["npu"], process["chip"] if process["chip"] is not None else -1)
        if key[1] == -1:
            # The A3 process table names the NPU only; its first chip is meant.
            key = (key[0], first_chip.get(key[0], 0))
        by_chip.setdefault(key, []).append(
            {
                "pid": process["pid"],
                "name": process["name"] or "",
                "memory_mb": process["memory_mb"],
            }
        )
    samples: dict[int, dict[str, Any]] = {}
    for position, chip in enumerate(info["chips"]):
        key = (chip["npu"], chip["chip"])
        index = chip["device"] if chip["device"] is not None else logic_ids.get(key, position)
        readings: dict[str, float] = {}
        for name, value in (
            ("temperature_c", chip["temp_c"]),
            ("power_w", chip["power_w"]),
            ("utilization_pct", chip["aicore_pct"]),
        ):
            if value is not None:
                readings[name] = float(value)
        if chip["hbm_total_mb"]:
            readings["memory_used_mb"] = float(chip["hbm_used_mb"] or 0)
            readings["memory_total_mb"] = float(chip["hbm_total_mb"])
        elif chip["memory_total_mb"]:
            readings["memory_used_mb"] = float(chip["memory_used_mb"] or 0)
            readings["memory_total_mb"] = float(chip["memory_total_mb"])
        processes = by_chip.get(key, [])
        if has_processes:
            readings["process_count"] = float(len(processes))
        sample = contract.sample(
            when,
            index,
            health_state(chip["health"]),
            readings,
            processes[: contract.MAX_PROCESSES],
        )
        sample["_chip"] = key
        samples[index] = sample
    return samples


class NpuSampler:
    """Samples every NPU chip; keeps the logic-id mapping and the slow calls' turn."""

    def __init__(
        self,
        tool: str = TOOL,
        timeout_s: float = TOOL_TIMEOUT_S,
        slow_every: int = SLOW_EVERY,
        slow_chips: int = SLOW_CHIPS,
    ):
        self.tool = tool
        self.timeout_s = timeout_s
        self.slow_every = max(1, slow_every)
        self.slow_chips = slow_chips
        self._logic_ids: dict[tuple[int, int], int] | None = None
        self._known: list[int] = []
        self._intervals = 0
        self._turn = 0
        self._health_logged: dict[int, str] = {}
        self._lock = threading.Lock()

    def __call__(self, when: float, indices: list[int] | None) -> list[dict[str, Any]]:
        with self._lock:
            return self._sample(when, indices)

    def _sample(self, when: float, indices: list[int] | None) -> list[dict[str, Any]]:
        self._intervals += 1
        try:
            text = self._run(["info"])
            info = parse_info(text)
        except (ToolFailed, NpuSmiParseError) as exc:
            error = f"{self.tool} info: {exc}"
            wanted = indices if indices is not None else (self._known or [0])
            return [contract.sample(when, index, error=error) for index in wanted]
        slow = (self._intervals - 1) % self.slow_every == 0
        if self._logic_ids is None and slow:
            self._logic_ids = self._mapping()
        by_index = table_samples(info, when, self._logic_ids or {}, "process id" in text.lower())
        self._known = sorted(by_index)
        wanted = indices if indices is not None else self._known
        samples = []
        for index in wanted:
            found = by_index.get(index)
            if found is None:
                samples.append(
                    contract.sample(when, index, error=f"{self.tool} info lists no chip {index}")
                )
            else:
                samples.append(found)
        if slow:
            self._slow(samples)
        for sample in samples:
            sample.pop("_chip", None)
        return samples

    def _mapping(self) -> dict[tuple[int, int], int] | None:
        try:
            rows = parse_chip_mapping(self._run(["info", "-m"]))
        except (ToolFailed, NpuSmiParseError) as exc:
            log.info("%s info -m failed (%s); logic ids follow the table's order", self.tool, exc)
            return None
        return {
            (int(row["npu"]), int(row["chip"])): int(row["logic_id"])
            for row in rows
            if row["logic_id"] is not None
        }

    def _slow(self, samples: list[dict[str, Any]]) -> None:
        chips = [sample for sample in samples if "_chip" in sample]
        if not chips or self.slow_chips <= 0:
            return
        count = min(self.slow_chips, len(chips))
        for offset in range(count):
            sample = chips[(self._turn + offset) % len(chips)]
            try:
                self._slow_chip(sample)
            except ToolTimedOut as exc:
                # A hanging query would cost its timeout again on every chip: stop for now.
                log.info("%s detail for device %s: %s", self.tool, sample["index"], exc)
                break
        self._turn = (self._turn + count) % len(chips)

    def _slow_chip(self, sample: dict[str, Any]) -> None:
        npu, chip = sample["_chip"]
        readings = sample["readings"]
        queries: list[tuple[str, Callable[[dict[str, str]], dict[str, float]]]] = [
            ("usages", usages_readings),
            ("ecc", ecc_readings),
        ]
        if "power_w" not in readings:
            queries.append(("power", power_readings))
        if "temperature_c" not in readings:
            queries.append(("temp", temp_readings))
        if "memory_total_mb" not in readings:
            queries.append(("memory", memory_readings))
        for query, extract in queries:
            values = self._values(query, npu, chip)
            if values is not None:
                for name, value in extract(values).items():
                    readings.setdefault(name, value)
        if sample["health"] not in (contract.HEALTH_OK, contract.HEALTH_UNKNOWN):
            values = self._values("health", npu, chip)
            if values is not None:
                state, detail = health_detail(values)
                if self._health_logged.get(sample["index"]) != detail:
                    self._health_logged[sample["index"]] = detail
                    log.warning(
                        "NPU %s chip %s (device %s) health %s, %s",
                        npu,
                        chip,
                        sample["index"],
                        state,
                        detail,
                    )
        else:
            self._health_logged.pop(sample["index"], None)

    def _values(self, query: str, npu: int, chip: int) -> dict[str, str] | None:
        try:
            text = self._run(["info", "-t", query, "-i", str(npu), "-c", str(chip)])
            return parse_key_values(text)
        except ToolTimedOut:
            raise
        except (ToolFailed, NpuSmiParseError) as exc:
            # Not every chip has every query (a 310 has no -t ecc): nothing to add.
            log.debug("%s info -t %s -i %s -c %s: %s", self.tool, query, npu, chip, exc)
            return None

    def _run(self, args: list[str]) -> str:
        return run_tool([self.tool, *args], self.timeout_s)


_DEFAULT = NpuSampler()


def sample_devices(when: float, indices: list[int] | None) -> list[dict[str, Any]]:
    return _DEFAULT(when, indices)
