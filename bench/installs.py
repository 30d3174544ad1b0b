"""The main environment's install, pip against uv, as a fresh clone's `make` does it.

Two new venvs in a temporary directory, each given what `.run-deps` and `.test-deps`
install (torch, numpy, expecttest, this checkout editable with its ``dev`` and ``parity``
extras): one with pip, one command after the other as the Makefile did before uv; one with
``deploy/uv_pip_install.py`` as it does now, uv itself installed by pip first and its cache
empty unless ``--uv-cache`` names one. Wall time and CPU (user + system) per step, and
whether both venvs hold the same packages at the same versions.

    .venv/bin/python bench/installs.py [--uv-cache DIR]

It takes some 5 minutes on the 2-core machine, and pip's downloads come from its cache or
index as configured there.
"""

from __future__ import annotations

import argparse
import os
import platform as host_platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.common import run_for_cpu, write_report  # noqa: E402

PINS = dict(re.findall(r"^(TORCH|UV_RELEASE) \?= (\S+)$", (REPO / "Makefile").read_text(), re.M))
INSTALLER = str(REPO / "deploy" / "uv_pip_install.py")


def timed(command: list[str], env: dict[str, str]) -> dict[str, float]:
    started = time.monotonic()
    cpu = run_for_cpu(command, env=env, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - started
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}


def freeze(python: Path) -> set[str]:
    listing = subprocess.run(
        [str(python), "-m", "pip", "freeze", "--exclude-editable"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line for line in listing.splitlines() if line and not line.startswith("uv==")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uv-cache", help="uv's cache (default: a new, empty one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="npulab-installs-") as scratch:
        root = Path(scratch)
        env = {**os.environ, "UV_CACHE_DIR": args.uv_cache or str(root / "uv-cache")}
        pip_python, uv_python = root / "pip" / "bin" / "python", root / "uv" / "bin" / "python"
        uv = str(root / "uv" / "bin" / "uv")
        steps: dict[str, dict[str, dict[str, float]]] = {"pip": {}, "uv": {}}
        for name in ("pip", "uv"):
            steps[name]["venv"] = timed([sys.executable, "-m", "venv", str(root / name)], env)
        pip = [str(pip_python), "-m", "pip", "install", "--quiet"]
        steps["pip"]["run-deps"] = timed([*pip, PINS["TORCH"], "numpy"], env)
        steps["pip"]["run-deps, expecttest"] = timed([*pip, "expecttest"], env)
        steps["pip"]["run-deps, -e ."] = timed([*pip, "-e", str(REPO)], env)
        steps["pip"]["test-deps"] = timed([*pip, "-e", f"{REPO}[dev,parity]"], env)
        steps["uv"]["uv itself"] = timed(
            [str(uv_python), "-m", "pip", "install", "--quiet", PINS["UV_RELEASE"]], env
        )
        install = [str(uv_python), INSTALLER, uv]
        steps["uv"]["run-deps"] = timed([*install, PINS["TORCH"], "numpy"], env)
        steps["uv"]["run-deps, -e ."] = timed([*install, "expecttest", "-e", str(REPO)], env)
        steps["uv"]["test-deps"] = timed([*install, "-e", f"{REPO}[dev,parity]"], env)
        by_pip, by_uv = freeze(pip_python), freeze(uv_python)
    write_report(
        "installs",
        {
            "machine": f"{host_platform.machine()}, {os.cpu_count()} cores, "
            f"Python {host_platform.python_version()}, load {os.getloadavg()[0]:.1f}",
            "uv_cache": args.uv_cache or "empty",
            "steps": steps,
            "total": {
                name: {
                    unit: round(sum(step[unit] for step in by_step.values()), 1)
                    for unit in ("wall_s", "cpu_s")
                }
                for name, by_step in steps.items()
            },
            "packages": len(by_pip),
            "same_packages_and_versions": by_pip == by_uv,
            "only_pip": sorted(by_pip - by_uv),
            "only_uv": sorted(by_uv - by_pip),
        },
    )


if __name__ == "__main__":
    main()
