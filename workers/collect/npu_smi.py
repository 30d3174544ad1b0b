"""Parsers for ``npu-smi`` output."""

from __future__ import annotations

import re

_MAPPING_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+|-)\s+(.*?)\s*$")


class NpuSmiParseError(ValueError):
    """The text is not the npu-smi output the parser was asked to read."""


def parse_chip_mapping(text: str) -> list[dict[str, int | str | None]]:
    """Rows of ``npu-smi info -m``: NPU id, chip id, logic id (None for an Mcu) and name.

    The logic id is what ``ASCEND_RT_VISIBLE_DEVICES`` and ``npu:N`` count in.
    """
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if "Chip Logic ID" in line), None)
    if header is None:
        raise NpuSmiParseError("no 'Chip Logic ID' header: not `npu-smi info -m` output")
    rows: list[dict[str, int | str | None]] = []
    for line in lines[header + 1 :]:
        match = _MAPPING_ROW.match(line)
        if not match:
            continue
        npu, chip, logic, name = match.groups()
        rows.append(
            {
                "npu": int(npu),
                "chip": int(chip),
                "logic_id": None if logic == "-" else int(logic),
                "name": name,
            }
        )
    return rows
