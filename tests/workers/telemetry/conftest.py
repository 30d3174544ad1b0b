"""Fake device tools on PATH (tests.workers.fake_tool) that print the real captured outputs.

The outputs are the captures in tests/fixtures/ascend/, whole, or one command's
section of a capture that holds several (``section``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.paths import ASCEND_FIXTURES
from tests.workers.fake_tool import FakeTool

INFO = ASCEND_FIXTURES / "npu-smi-info"
OTHER = ASCEND_FIXTURES / "npu-smi-other"
DOC = OTHER / "OFFICIAL-DOC_Atlas200IA2_board_usages_health_product_v_h.txt"
ERRORS = OTHER / "npu-smi-ERRORS_dcmi-8005_-8020_in-container.txt"


def section(path: Path, header: str) -> str:
    """The output printed under ``header`` in a capture of several commands.

    It runs from the line after the header to the next line that is neither
    indented nor blank (the next command or comment), byte for byte.
    """
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.rstrip() == header) + 1
    end = start
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t"):
        end += 1
    return "".join(lines[start:end])


def dcmi_error(code: str) -> str:
    """The two lines npu-smi prints in a container (dcmi -8005 or -8020), as captured."""
    lines = ERRORS.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if f"ret is {code}" in line)
    return lines[at - 1] + lines[at]


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
    return directory


@pytest.fixture
def npu_smi(bin_dir: Path) -> FakeTool:
    return FakeTool(bin_dir, "npu-smi")


@pytest.fixture
def nvidia_smi(bin_dir: Path) -> FakeTool:
    return FakeTool(bin_dir, "nvidia-smi")
