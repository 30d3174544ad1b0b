"""Fake device tools on PATH that print the real captured outputs.

A fake is a shell script that logs its arguments and answers each argument
pattern (a shell ``case`` glob) with a file's bytes and an exit code, or hangs.
The outputs are the captures in tests/fixtures/ascend/, whole, or one command's
section of a capture that holds several (``section``).
"""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

import pytest

from tests.paths import ASCEND_FIXTURES

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


class FakeTool:
    """One fake executable in ``directory``; ``answer`` adds a rule, ``calls`` reads the log."""

    def __init__(self, directory: Path, name: str):
        self.directory = directory
        self.name = name
        self.path = directory / name
        self.log = directory / f"{name}.calls"
        self.hang_pid = directory / f"{name}.hang.pid"  # the hanging child's pid
        self.rules: list[str] = []
        self._outputs = 0
        self._write()

    def answer(
        self, pattern: str, output: str | Path | None = None, code: int = 0, hang: bool = False
    ) -> FakeTool:
        """Answer arguments matching ``pattern`` (rules match in the order added)."""
        body = []
        if hang:
            # A child that would outlive a kill of the script alone, holding the pipes open.
            body.append(f"sleep 600 & echo $! > {shlex.quote(str(self.hang_pid))}; wait")
        if output is not None:
            if isinstance(output, str):
                self._outputs += 1
                target = self.directory / f"{self.name}.out{self._outputs}"
                target.write_text(output, encoding="utf-8")
                output = target
            stream = " >&2" if code else ""
            body.append(f"cat {shlex.quote(str(output))}{stream}")
        body.append(f"exit {code}")
        self.rules.append(f"  {pattern}) {'; '.join(body)};;")
        self._write()
        return self

    def calls(self) -> list[str]:
        if not self.log.exists():
            return []
        return self.log.read_text(encoding="utf-8").splitlines()

    def _write(self) -> None:
        script = [
            "#!/bin/sh",
            f'echo "$*" >> {shlex.quote(str(self.log))}',
            'case "$*" in',
            *self.rules,
            '  *) echo "Error: unknown parameters: $*" >&2; exit 1;;',
            "esac",
        ]
        self.path.write_text("\n".join(script) + "\n", encoding="utf-8")
        self.path.chmod(self.path.stat().st_mode | stat.S_IEXEC)


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
