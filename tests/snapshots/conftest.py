"""Snapshot documents made by the real collector from the real captures."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.ascend_tree import build_ascend_tree
from tests.paths import ASCEND_FIXTURES
from workers.collect.snapshot import collect

A2_8CARD = ASCEND_FIXTURES / "npu-smi-info/01_910B3_8card_npu-smi-25.2.0_procs_and_no-running.txt"


@pytest.fixture(scope="session")
def collected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("ascend")
    return collect(
        ascend_root=str(build_ascend_tree(root / "Ascend")),
        etc_dir=str(root),
        npu_smi_output=str(A2_8CARD),
        probe_torch_npu=False,
    )


@pytest.fixture
def document(collected: dict[str, Any]) -> Callable[..., dict[str, Any]]:
    """A fresh copy of the collected snapshot, changed as asked.

    ``packages`` replaces or removes (None) distributions, ``key`` the called-out
    versions, ``cann`` the toolkit version; ``hostname`` the host.
    """

    def make(
        packages: dict[str, str | None] | None = None,
        cann: str | None = None,
        hostname: str | None = None,
        **key: str,
    ) -> dict[str, Any]:
        doc = copy.deepcopy(collected)
        python = doc["python"]
        for name, version in (packages or {}).items():
            if version is None:
                python["packages"].pop(name, None)
            else:
                python["packages"][name] = version
        for name, version in key.items():
            python["key"][name.replace("_", "-")] = version
            python["packages"][name.replace("_", "-")] = version
        if cann:
            install = doc["ascend"]["cann"]["installs"][0]
            install["version"] = cann
            doc["ascend"]["cann"]["links"][0]["target"] = cann
        if hostname:
            doc["host"]["hostname"] = hostname
        return doc

    return make
