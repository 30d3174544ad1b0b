"""Guards for the two facts the layout rests on (see DESIGN.md)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from django.apps import apps

from tests.paths import REPO_DIR
from workers.contract import kinds


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
    # numpy only where its absence is handled (RNG states are saved when it is there);
    # psutil likewise (workers/telemetry/cpu.py reads /proc and /sys without it).
    # mindspore in a MindSpore run's interpreter, as torch in a PyTorch one's; msprobe
    # only in a parity run's dump, whose runner says first when it is missing; tensorboard
    # only to read event files, the worker's optional extra (a notice without it).
    allowed = sys.stdlib_module_names | {
        *("workers", "torch", "torch_npu", "mindspore", "numpy", "psutil", "msprobe"),
        *("tensorboard", "__future__"),
        # google_crc32c: TensorBoard's record check in C where the extra installed it
        # (workers/capture/record_crc.py); TensorBoard's own check without it.
        "google_crc32c",
    }
    # The host worker and the npulab CLI (a kind's part of it too: workers/kinds/*/cli.py)
    # are installed with their own dependencies.
    runner_side = [
        path
        for path in (REPO_DIR / "workers").rglob("*.py")
        if not {"host", "cli", "cli.py"} & set(path.relative_to(REPO_DIR / "workers").parts)
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


# The code every run goes through, whatever its kind.
GENERIC_RUN_CODE = [
    *(REPO_DIR / "platform" / "npulab" / "runs").rglob("*.py"),
    REPO_DIR / "workers" / "run.py",
    *(REPO_DIR / "workers" / "host").rglob("*.py"),
]
GENERIC_RUN_TEMPLATES = list((REPO_DIR / "templates" / "runs").rglob("*.html"))


def _string_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    }


def test_generic_run_code_names_no_kind() -> None:
    names = set(kinds.names())
    offenders = [
        f"{path.relative_to(REPO_DIR)}: {sorted(names & _string_constants(path))}"
        for path in GENERIC_RUN_CODE
        if "migrations" not in path.parts and names & _string_constants(path)
    ]
    for path in GENERIC_RUN_TEMPLATES:
        text = path.read_text()
        if re.search(r"kind\s*==\s*[\"']", text) or any(f'"{name}"' in text for name in names):
            offenders.append(str(path.relative_to(REPO_DIR)))
    assert offenders == []


def test_kind_declarations_import_only_the_standard_library_and_the_contract() -> None:
    """The platform imports them to validate submissions: no torch, no runner code."""
    allowed = sys.stdlib_module_names | {"__future__", "workers"}
    offenders = []
    for kind in kinds.all_kinds():
        module = sys.modules[kind.runner.rsplit(".", 1)[0]]
        for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported = node.module
            elif isinstance(node, ast.Import):
                imported = node.names[0].name
            else:
                continue
            top = imported.split(".")[0]
            if top not in allowed or (
                top == "workers" and not imported.startswith("workers.contract")
            ):
                offenders.append(f"{kind.name}: {imported}")
    assert offenders == []


def test_bench_and_harness_never_import_the_tests() -> None:
    """What both need (the stack, the services, synthetic data) is in harness/."""
    offenders = []
    for folder in ("bench", "harness"):
        for path in (REPO_DIR / folder).rglob("*.py"):
            if any(part.startswith(".") for part in path.relative_to(REPO_DIR).parts):
                continue  # bench/.mlflow-venv: MLflow's own environment, not the project's
            for node in ast.walk(ast.parse(path.read_text())):
                modules = []
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    modules = [node.module]
                offenders += [f"{path.name}: {m}" for m in modules if m.split(".")[0] == "tests"]
    assert offenders == []


def test_the_contracts_names_are_written_once() -> None:
    """An environment variable of the contract is spelled in workers/contract alone."""
    from workers.contract import script_env
    from workers.contract.kinds import EXTRA_KINDS_ENV

    names = {
        value
        for key, value in vars(script_env).items()
        if key.isupper() and isinstance(value, str) and value.startswith("NPULAB_")
    } | {EXTRA_KINDS_ENV}
    offenders = []
    for folder in ("workers", "platform"):
        for path in (REPO_DIR / folder).rglob("*.py"):
            if "contract" in path.relative_to(REPO_DIR).parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and node.value in names:
                    offenders.append(f"{path.relative_to(REPO_DIR)}: {node.value}")
    assert offenders == []
