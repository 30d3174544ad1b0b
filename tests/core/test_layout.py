"""Guards for the two facts the layout rests on (see DESIGN.md)."""

from __future__ import annotations

import ast
import sys

from django.apps import apps

from tests.paths import REPO_DIR


def test_platform_is_a_source_root_not_a_package() -> None:
    assert (REPO_DIR / "platform").is_dir()
    assert not (REPO_DIR / "platform" / "__init__.py").exists()


def test_no_app_or_top_level_package_shadows_the_standard_library() -> None:
    names = {config.name.split(".")[-1] for config in apps.get_app_configs()}
    names |= {config.label for config in apps.get_app_configs()}
    names |= {path.name for path in (REPO_DIR / "platform").iterdir() if path.is_dir()}
    names |= {"workers", "npulab"}
    assert names & sys.stdlib_module_names == set()


def test_workers_never_import_django() -> None:
    offenders = []
    for path in (REPO_DIR / "workers").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            offenders += [
                f"{path}: {m}" for m in modules if m.split(".")[0] in ("django", "npulab")
            ]
    assert offenders == []


def test_runner_side_modules_need_only_the_standard_library() -> None:
    """What runs in the user's interpreter may import torch, nothing else outside stdlib."""
    # numpy only where its absence is handled (RNG states are saved when it is there).
    allowed = sys.stdlib_module_names | {"workers", "torch", "torch_npu", "numpy", "__future__"}
    runner_side = [
        path
        for path in (REPO_DIR / "workers").rglob("*.py")
        if "host" not in path.relative_to(REPO_DIR / "workers").parts
    ]
    offenders = []
    for path in runner_side:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            offenders += [f"{path.name}: {m}" for m in modules if m.split(".")[0] not in allowed]
    assert offenders == []
