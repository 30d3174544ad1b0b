"""Fake /usr/local/Ascend trees built from the real captured files in tests/fixtures/ascend."""

from __future__ import annotations

import os
from pathlib import Path

# The captured Ascend files the tree is made of (data the tests keep, not test code).
ASCEND_FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "ascend"

VERSIONS = ASCEND_FIXTURES / "versions"
DRIVER_25 = "driver_and_firmware_version.info_25.0.rc1.1_fw-7.7.0.1.231.txt"
TOOLKIT = "cann_ascend_toolkit_install_info_{}.txt"


def body(name: str) -> str:
    """The capture without its ``# source:`` line."""
    return (VERSIONS / name).read_text().split("\n", 1)[1]


def section(name: str, marker: str, until_comment: bool = False) -> str:
    """The lines after the prompt line holding ``marker``, up to the next blank line.

    Leading blank lines are skipped (some captures leave one after the
    command); ``until_comment`` stops at the next ``#`` line instead.
    """
    lines = body(name).splitlines()
    start = next(i for i, line in enumerate(lines) if marker in line) + 1
    while start < len(lines) and not lines[start].strip():
        start += 1
    taken = []
    for line in lines[start:]:
        if line.startswith("#") if until_comment else not line.strip():
            break
        taken.append(line)
    return "\n".join(taken) + "\n"


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def link(root: Path, relative: str, target: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)


def driver_25() -> str:
    return section(DRIVER_25, "driver# cat version.info")


def firmware_25() -> str:
    return section(DRIVER_25, "firmware# cat version.info")


def build_ascend_tree(root: Path, toolkit: str = "8.1.RC1_x86_64") -> Path:
    """Driver 25.0.rc1.1, its firmware and one toolkit with ``latest`` pointing at it."""
    write(root, "driver/version.info", driver_25())
    write(root, "firmware/version.info", firmware_25())
    version, arch = toolkit.split("_", 1)
    arch = "x86_64" if arch.startswith("x86_64") else "aarch64"
    write(
        root,
        f"ascend-toolkit/{version}/{arch}-linux/ascend_toolkit_install.info",
        body(TOOLKIT.format(toolkit)),
    )
    link(root, "ascend-toolkit/latest", version)
    return root
