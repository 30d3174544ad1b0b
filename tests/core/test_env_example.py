"""deploy/env.example lists every variable npulab reads."""

from __future__ import annotations

import re

from tests.paths import REPO_DIR
from workers.contract import gang, script_env

# Set by npulab for a run's processes, not read as configuration: the contract's names for
# them (workers.contract.script_env; a run across hosts' own, workers.contract.gang).
SET_FOR_RUNS = {
    value
    for module in (script_env, gang)
    for name, value in vars(module).items()
    if name.isupper() and isinstance(value, str) and value.startswith("NPULAB_")
}


def test_every_variable_read_is_documented() -> None:
    names: set[str] = set()
    for path in [
        *REPO_DIR.joinpath("platform").rglob("*.py"),
        *REPO_DIR.joinpath("workers").rglob("*.py"),
    ]:
        names |= set(
            re.findall(r'"((?:NPULAB_[A-Z0-9_]+)|DATABASE_URL|PORT|BIND)"', path.read_text())
        )
    documented = set(
        re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", (REPO_DIR / "deploy/env.example").read_text(), re.M)
    )
    assert names - SET_FOR_RUNS - documented == set()
