"""Parsers for ``npu-smi`` output.

``parse_chip_mapping`` reads ``npu-smi info -m``, ``parse_info`` the full
``npu-smi info`` table, and ``identify_chips`` names each chip's generation
without trusting the bare ``910B`` name. ``python -m workers.collect.npu_smi FILE``
prints ``parse_info`` of a saved capture as JSON.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

_MAPPING_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+|-)\s+(.*?)\s*$")
# Atlas A3 prints a ``Chip Phy-ID`` column between the logic id and the name.
_MAPPING_ROW_PHY = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+|-)\s+(\d+|-)\s+(.*?)\s*$")
# Ascend 950 prints ``NPU ID  Slot ID  Chip ID  Chip Phy-ID  Chip Name``: its NPU ID is the
# logical id, and -1 where the NPU is unavailable (its row then means nothing).
_MAPPING_ROW_950 = re.compile(r"^\s*(-?\d+)\s+(-?\d+)\s+(\d+)\s+(\d+|-)\s+(.*?)\s*$")
_MAPPING_HEADERS = ("Chip Logic ID", "Slot ID")

_TITLE = re.compile(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)")
_BORDER = re.compile(r"^\+[-=+]*\+$")
_NO_PROCESSES = re.compile(r"^No running processes found in NPU\s+\d+$")
# Sub-columns inside one `|` cell are separated by runs of blanks in the header,
# while a single blank occurs inside names such as "Process id".
_SUBCOLUMN_GAP = re.compile(r"\s{2,}")
# A "used / total" pair is one value even though it contains blanks.
_VALUE = re.compile(r"\S+\s*/\s*\S+|\S+")
_UNIT = re.compile(r"\(.*\)$")
_ERROR_LINE = re.compile(r"\bret is -?\d+")
_MISSING = ("-", "NA", "")

CHIP_KEYS = (
    "npu",
    "chip",
    "name",
    "health",
    "power_w",
    "temp_c",
    "bus_id",
    "aicore_pct",
    "memory_used_mb",
    "memory_total_mb",
    "hbm_used_mb",
    "hbm_total_mb",
    "hugepages_used",
    "hugepages_total",
    "phy_id",
    "device",
)
PROCESS_KEYS = ("npu", "chip", "pid", "name", "memory_mb", "container_pid")

GENERATIONS = {
    "910-first-gen": "first-generation Ascend 910 (soc 100-104: 910PremiumA, 910ProA, "
    "910A, 910ProB, 910B)",
    "atlas-a2": "Atlas A2, Ascend 910B1-910B4 (soc 220-224)",
    "atlas-a3": "Atlas A3, Ascend 910C1-910C4 (soc 250-253)",
    "310": "first-generation Ascend 310",
    "310P": "Ascend 310P1-310P4 (soc 200-203)",
    "310B": "Ascend 310B1-310B4 (soc 240-243)",
    "unknown": "not recognised",
}
# Names that settle the generation on their own. A bare "910B" is absent on
# purpose: first-generation parts (soc 104) print it as well as the A2 family.
_NAME_GENERATIONS = (
    (re.compile(r"^910B[1-4]"), "atlas-a2"),
    (re.compile(r"^910(C\d|_93)"), "atlas-a3"),
    (re.compile(r"^910(A|ProA|ProB|PremiumA)$"), "910-first-gen"),
    (re.compile(r"^310P"), "310P"),
    (re.compile(r"^310B"), "310B"),
    (re.compile(r"^(310|MiniD)$"), "310"),
)
# `npu-smi info -m` spells names "Ascend 910B4" where the table prints "910B4".
_ASCEND_PREFIX = re.compile(r"^Ascend\s+")
_FIRST_GEN_HBM_MB = 32768


class NpuSmiParseError(ValueError):
    """The text is not the npu-smi output the parser was asked to read."""


def parse_chip_mapping(text: str) -> list[dict[str, int | str | None]]:
    """Rows of ``npu-smi info -m``: NPU id, chip id, logic id (None for an Mcu), physical
    id and name.

    The logic id is what ``ASCEND_RT_VISIBLE_DEVICES`` and ``npu:N`` count in; the
    physical id what hccn_tool's ``-i`` and a rank table's ``device_id`` take. Three
    layouts are known (npu-smi's ``print_mapping_info``, ``_910_93`` and ``_950``):
    ``NPU ID  Chip ID  Chip Logic ID  Chip Name`` (Atlas A2 and older: no physical id,
    None), Atlas A3's with ``Chip Phy-ID`` before the name, and Ascend 950's ``NPU ID
    Slot ID  Chip ID  Chip Phy-ID  Chip Name``, whose NPU ID is the logical id (a row of
    NPU ID -1, an unavailable NPU, is left out).
    """
    lines = text.splitlines()
    header = next(
        (
            i
            for i, line in enumerate(lines)
            if "NPU ID" in line and any(name in line for name in _MAPPING_HEADERS)
        ),
        None,
    )
    if header is None:
        raise NpuSmiParseError(
            "no 'NPU ID ... Chip Logic ID' or 'NPU ID  Slot ID ... Chip Phy-ID' header: "
            "not `npu-smi info -m` output"
        )
    if "Chip Logic ID" not in lines[header]:
        return _mapping_950(lines[header + 1 :])
    with_phy = "Chip Phy-ID" in lines[header]
    rows: list[dict[str, int | str | None]] = []
    for line in lines[header + 1 :]:
        match = (_MAPPING_ROW_PHY if with_phy else _MAPPING_ROW).match(line)
        if not match:
            continue
        if with_phy:
            npu, chip, logic, phy, name = match.groups()
        else:
            (npu, chip, logic, name), phy = match.groups(), "-"
        rows.append(
            {
                "npu": int(npu),
                "chip": int(chip),
                "logic_id": None if logic == "-" else int(logic),
                "phy_id": None if phy == "-" else int(phy),
                "name": name,
            }
        )
    return rows


def _mapping_950(lines: list[str]) -> list[dict[str, int | str | None]]:
    rows: list[dict[str, int | str | None]] = []
    for line in lines:
        match = _MAPPING_ROW_950.match(line)
        if not match:
            continue
        npu, _slot, chip, phy, name = match.groups()
        if int(npu) < 0:
            continue
        rows.append(
            {
                "npu": int(npu),
                "chip": int(chip),
                "logic_id": int(npu),
                "phy_id": None if phy == "-" else int(phy),
                "name": name,
            }
        )
    return rows


def parse_info(text: str) -> dict[str, Any]:
    """The ``npu-smi info`` table: versions, one dict per chip and one per process.

    Chips carry the keys in ``CHIP_KEYS``, processes those in ``PROCESS_KEYS``;
    a value is None where the layout has no such column or prints ``-``/``NA``.
    Ids, MB, pages and pids are ints; power and temperature are always floats;
    names, health, Bus-Id and versions are strings as printed (an empty process
    name stays ``""``). Columns are found by the table's ``|`` separators and
    header names, so unseen widths parse too.
    """
    title: tuple[str, str] | None = None
    header: list[list[list[str]]] | None = None
    kind = ""
    seen_chip_header = False
    chips: list[dict[str, Any]] = []
    processes: list[dict[str, Any]] = []
    for block in _blocks(text):
        first_cell = block[0][1][0]
        match = _TITLE.match(first_cell)
        if title is None and match:
            title = (match.group(1), match.group(2))
        elif title is None:
            # Anything boxed before the title belongs to some other output.
            continue
        elif match:
            # A second capture (e.g. from `watch`) follows; the first one is read.
            break
        elif first_cell.split()[:1] == ["NPU"]:
            header = [[_column_names(cell) for cell in cells] for _, cells in block]
            kind = _table_kind(header, block[0][0])
            seen_chip_header = seen_chip_header or kind == "chips"
        elif header is not None:
            for lineno, values in _records(header, block):
                if kind == "chips":
                    chips.append(_chip(values, lineno))
                elif kind == "processes":
                    processes.append(_process(values, lineno))
    if title is None:
        raise _not_a_table(text)
    if not seen_chip_header:
        raise NpuSmiParseError(
            "expected an 'NPU  Name | Health | Power(W) ...' header row after the "
            "npu-smi title line; found none"
        )
    return {
        "tool_version": title[0],
        "driver_version": title[1],
        "chips": chips,
        "processes": processes,
    }


def _blocks(text: str) -> list[list[tuple[int, list[str]]]]:
    """Runs of table rows between border lines, each row as (line number, cells).

    Lines that are not part of a box (shell prompts, ``#`` comments, blank
    lines) are dropped, so captures may carry them around the table.
    """
    blocks: list[list[tuple[int, list[str]]]] = []
    current: list[tuple[int, list[str]]] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if _BORDER.match(line):
            if current:
                blocks.append(current)
            current = []
        elif line.startswith("|"):
            current.append((lineno, _cells(line)))
    if current:
        blocks.append(current)
    return blocks


def _cells(line: str) -> list[str]:
    inner = line[1:]
    # A row cut off by the terminal still counts; its last cell is then partial.
    if inner.endswith("|"):
        inner = inner[:-1]
    return [cell.strip() for cell in inner.split("|")]


def _column_names(cell: str) -> list[str]:
    """Normalised sub-column names of one header cell: "Power(W)" -> "power"."""
    return [_UNIT.sub("", name).strip().lower() for name in _SUBCOLUMN_GAP.split(cell)]


def _table_kind(header: list[list[list[str]]], lineno: int) -> str:
    names = {name for row in header for cell in row for name in cell}
    if {"npu", "name", "health"} <= names:
        if "chip" not in names:
            raise NpuSmiParseError(f"line {lineno}: chip header has no 'Chip' column")
        return "chips"
    if {"npu", "process id"} <= names:
        return "processes"
    # A table this parser does not know yet is skipped rather than misread.
    return ""


def _records(
    header: list[list[list[str]]], block: list[tuple[int, list[str]]]
) -> list[tuple[int, dict[str, str | None]]]:
    """Group a block's rows by the header's height and name every value.

    Chip records span two rows (as their header does); process records one, so a
    block of several process rows yields several records.
    """
    rows = [row for row in block if not _NO_PROCESSES.match(row[1][0])]
    height = len(header)
    records = []
    for start in range(0, len(rows), height):
        chunk = rows[start : start + height]
        if len(chunk) != height:
            raise NpuSmiParseError(
                f"line {chunk[0][0]}: a record needs {height} rows, as its header has; "
                f"found {len(chunk)}"
            )
        values: dict[str, str | None] = {}
        for names_by_cell, (lineno, cells) in zip(header, chunk):
            if len(cells) != len(names_by_cell):
                raise NpuSmiParseError(
                    f"line {lineno}: {len(cells)} '|' cells where the header has "
                    f"{len(names_by_cell)}"
                )
            for names, cell in zip(names_by_cell, cells):
                values.update(zip(names, _split_cell(cell, len(names))))
        records.append((chunk[0][0], values))
    return records


def _split_cell(cell: str, count: int) -> list[str | None]:
    """The cell's values, one per sub-column; None where a value is not printed."""
    if count == 1:
        return [cell]
    tokens = _VALUE.findall(cell)
    if len(tokens) > count:
        # Only a name can hold a blank, and names sit in a cell's last sub-column.
        tokens = [*tokens[: count - 1], " ".join(tokens[count - 1 :])]
    values: list[str | None] = list(tokens)
    values.extend([None] * (count - len(values)))
    return values


def _chip(values: dict[str, str | None], lineno: int) -> dict[str, Any]:
    memory = _pair(values, "memory-usage", lineno)
    hbm = _pair(values, "hbm-usage", lineno)
    hugepages = _pair(values, "hugepages-usage", lineno)
    return {
        "npu": _required_int(values, "npu", lineno),
        "chip": _required_int(values, "chip", lineno),
        "name": _text(values.get("name")),
        "health": _text(values.get("health")),
        "power_w": _number(values, "power", lineno, float),
        "temp_c": _number(values, "temp", lineno, float),
        "bus_id": _text(values.get("bus-id")),
        "aicore_pct": _number(values, "aicore", lineno, int),
        "memory_used_mb": memory[0],
        "memory_total_mb": memory[1],
        "hbm_used_mb": hbm[0],
        "hbm_total_mb": hbm[1],
        "hugepages_used": hugepages[0],
        "hugepages_total": hugepages[1],
        "phy_id": _number(values, "phy-id", lineno, int),
        "device": _number(values, "device", lineno, int),
    }


def _process(values: dict[str, str | None], lineno: int) -> dict[str, Any]:
    return {
        "npu": _required_int(values, "npu", lineno),
        "chip": _number(values, "chip", lineno, int),
        "pid": _required_int(values, "process id", lineno),
        "name": _text(values.get("process name")),
        "memory_mb": _number(values, "process memory", lineno, int),
        "container_pid": _number(values, "process id in container", lineno, int),
    }


def _text(value: str | None) -> str | None:
    # An empty process name is printed as blanks; it stays "" to tell it from "-".
    if value is None or value in ("-", "NA"):
        return None
    return value


def _number(values: dict[str, str | None], column: str, lineno: int, kind: type) -> Any:
    return _convert(values.get(column), column, lineno, kind)


def _convert(value: str | None, column: str, lineno: int, kind: type) -> Any:
    if value is None or value in _MISSING:
        return None
    try:
        return kind(value)
    except ValueError:
        raise NpuSmiParseError(
            f"line {lineno}: {column!r} is {value!r}, expected a number"
        ) from None


def _required_int(values: dict[str, str | None], column: str, lineno: int) -> int:
    number = _number(values, column, lineno, int)
    if number is None:
        raise NpuSmiParseError(f"line {lineno}: no {column!r} value")
    return number


def _pair(values: dict[str, str | None], column: str, lineno: int) -> tuple[Any, Any]:
    """A "used / total" value as two ints; (None, None) where the column is absent."""
    value = values.get(column)
    if value is None or value in _MISSING:
        return (None, None)
    parts = value.split("/")
    if len(parts) != 2:
        raise NpuSmiParseError(f"line {lineno}: {column!r} is {value!r}, expected 'used / total'")
    return (
        _convert(parts[0].strip(), column, lineno, int),
        _convert(parts[1].strip(), column, lineno, int),
    )


def _not_a_table(text: str) -> NpuSmiParseError:
    expected = "expected `npu-smi info` output with a '| npu-smi X  Version: Y |' title line"
    for raw in text.splitlines():
        line = raw.strip()
        # Quoting the driver's complaint tells the reader why the table is missing.
        if not line.startswith("#") and _ERROR_LINE.search(line):
            return NpuSmiParseError(f"npu-smi failed ({line}); {expected}")
    if not text.strip():
        return NpuSmiParseError(f"empty text; {expected}")
    return NpuSmiParseError(f"no npu-smi title line; {expected}")


def identify_chips(
    info: dict[str, Any], mapping: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The generation of each chip in ``parse_info``'s result, with the evidence.

    ``generation`` is a key of ``GENERATIONS``. ``certain`` is False where the
    value is a best guess (or "unknown"); ``evidence`` says what decided. The
    optional ``mapping`` (``parse_chip_mapping`` of ``npu-smi info -m``) names
    chips whose npu-smi name is ambiguous or unknown.
    """
    mapped = {(row["npu"], row["chip"]): str(row["name"]) for row in mapping or []}
    per_npu: dict[int, int] = {}
    for chip in info["chips"]:
        per_npu[chip["npu"]] = per_npu.get(chip["npu"], 0) + 1
    result = []
    for chip in info["chips"]:
        generation, certain, evidence = _identify(
            chip, per_npu[chip["npu"]], mapped.get((chip["npu"], chip["chip"]))
        )
        result.append(
            {
                "npu": chip["npu"],
                "chip": chip["chip"],
                "name": chip["name"],
                "generation": generation,
                "certain": certain,
                "evidence": evidence,
            }
        )
    return result


def _identify(
    chip: dict[str, Any], chips_on_npu: int, mapped_name: str | None
) -> tuple[str, bool, str]:
    name = chip["name"] or ""
    generation = _generation_of(name)
    if generation:
        return generation, True, f"npu-smi name {name!r}: {GENERATIONS[generation]}"
    mapped_generation = _generation_of(mapped_name or "")
    if mapped_generation:
        return (
            mapped_generation,
            True,
            f"npu-smi name {name!r} does not decide; `npu-smi info -m` names the chip "
            f"{mapped_name!r}: {GENERATIONS[mapped_generation]}",
        )
    if name == "Ascend910":
        return _identify_ascend910(chip, chips_on_npu)
    if name == "910B":
        return _identify_bare_910b(chip)
    return "unknown", False, f"npu-smi name {name!r} is not a known chip name"


def _generation_of(name: str) -> str | None:
    bare = _ASCEND_PREFIX.sub("", name.strip())
    for pattern, generation in _NAME_GENERATIONS:
        if pattern.match(bare):
            return generation
    return None


def _identify_ascend910(chip: dict[str, Any], chips_on_npu: int) -> tuple[str, bool, str]:
    clues = []
    if chips_on_npu > 1:
        clues.append(f"{chips_on_npu} chips on NPU {chip['npu']}")
    if chip["phy_id"] is not None:
        clues.append("a 'Chip  Phy-ID' column")
    if clues:
        return (
            "atlas-a3",
            True,
            f"npu-smi name 'Ascend910' with {' and '.join(clues)}: the Atlas A3 layout, "
            "two dies per NPU (soc 250-253)",
        )
    return (
        "atlas-a3",
        False,
        "npu-smi name 'Ascend910' is how Atlas A3 prints, but this NPU shows one chip "
        "and no Phy-ID column",
    )


def _identify_bare_910b(chip: dict[str, Any]) -> tuple[str, bool, str]:
    # The fixtures show first-generation 910 with ~15 GB DDR beside 32 GB HBM,
    # while A2 parts report DDR as 0 / 0 and carry 32 or 64 GB HBM.
    both = "npu-smi name '910B' is printed by first-gen 910 (soc 104) and Atlas A2 alike"
    ddr, hbm = chip["memory_total_mb"], chip["hbm_total_mb"]
    if hbm is not None and hbm > _FIRST_GEN_HBM_MB:
        return "atlas-a2", True, f"{both}; HBM {hbm} MB exceeds the 32768 MB of any first-gen 910"
    if ddr and hbm:
        return (
            "910-first-gen",
            True,
            f"{both}; DDR {ddr} MB beside HBM {hbm} MB is the first-gen profile "
            "(Atlas A2 reports DDR 0 / 0)",
        )
    if ddr == 0 and hbm:
        return (
            "atlas-a2",
            False,
            f"{both}; DDR 0 / 0 as on Atlas A2, but HBM {hbm} MB fits both: "
            "check torch_npu.npu.get_soc_version() (104 first-gen, 220-224 A2)",
        )
    return "unknown", False, f"{both}; no memory columns to tell them apart"


def main(argv: list[str] | None = None) -> int:
    """Print ``parse_info`` of a saved ``npu-smi info`` capture as JSON; 2 on failure."""
    parser = argparse.ArgumentParser(
        prog="python -m workers.collect.npu_smi",
        description="Parse saved `npu-smi info` output and print it as JSON.",
    )
    parser.add_argument("file", help="file holding `npu-smi info` output, or - for stdin")
    args = parser.parse_args(argv)
    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
    except OSError as exc:
        print(f"npu-smi: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        info = parse_info(text)
    except NpuSmiParseError as exc:
        print(f"npu-smi: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
