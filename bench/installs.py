"""The main environment's install, pip against uv, as a fresh clone's `make` does it.

New venvs in a temporary directory, each given what `.test-deps` installs (torch, numpy,
expecttest, this checkout editable with its ``dev`` and ``parity`` extras):
- ``pip``: one command after the other, as the Makefile did before uv;
- ``uv, three commands``: ``deploy/uv_pip_install.py`` once for torch, once for expecttest
  and the checkout, once for the extras, as it did before 2026-12-06 (uv compiles the
  bytecode of the whole environment after each);
- ``uv, one command``: all of it in one, as it does now.
uv itself is installed by pip first; its cache is empty unless ``--uv-cache`` names one
(the first uv venv then fills it for the second: name a warm one to compare the two).
Wall time and CPU (user + system) per step, and whether the venvs hold the same packages
at the same versions.

    .venv/bin/python bench/installs.py [--uv-cache DIR] [--no-pip]

It takes some 5 minutes on the 2-core machine (about 2 without pip), and pip's downloads
come from its cache or index as configured there.
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


UV_STEPS, UV_ONE = "uv, three commands", "uv, one command"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uv-cache", help="uv's cache (default: a new, empty one)")
    parser.add_argument("--no-pip", action="store_true", help="only the two uv installs")
    args = parser.parse_args()
    methods = ([] if args.no_pip else ["pip"]) + [UV_STEPS, UV_ONE]
    with tempfile.TemporaryDirectory(prefix="npulab-installs-") as scratch:
        root = Path(scratch)
        env = {**os.environ, "UV_CACHE_DIR": args.uv_cache or str(root / "uv-cache")}
        folders = {method: root / f"venv-{index}" for index, method in enumerate(methods)}
        pythons = {method: folder / "bin" / "python" for method, folder in folders.items()}
        steps: dict[str, dict[str, dict[str, float]]] = {method: {} for method in methods}
        for method, folder in folders.items():
            steps[method]["venv"] = timed([sys.executable, "-m", "venv", str(folder)], env)
        if "pip" in steps:
            pip = [str(pythons["pip"]), "-m", "pip", "install", "--quiet"]
            steps["pip"]["torch, numpy"] = timed([*pip, PINS["TORCH"], "numpy"], env)
            steps["pip"]["expecttest"] = timed([*pip, "expecttest"], env)
            steps["pip"]["-e ."] = timed([*pip, "-e", str(REPO)], env)
            steps["pip"]["-e .[dev,parity]"] = timed([*pip, "-e", f"{REPO}[dev,parity]"], env)
        for method in (UV_STEPS, UV_ONE):
            python = str(pythons[method])
            steps[method]["uv itself"] = timed(
                [python, "-m", "pip", "install", "--quiet", PINS["UV_RELEASE"]], env
            )
            install = [python, INSTALLER, str(folders[method] / "bin" / "uv")]
            if method == UV_STEPS:
                steps[method]["torch, numpy"] = timed([*install, PINS["TORCH"], "numpy"], env)
                steps[method]["expecttest, -e ."] = timed(
                    [*install, "expecttest", "-e", str(REPO)], env
                )
                steps[method]["-e .[dev,parity]"] = timed(
                    [*install, "-e", f"{REPO}[dev,parity]"], env
                )
            else:
                steps[method]["all of it"] = timed(
                    [*install, PINS["TORCH"], "numpy", "expecttest", "-e", f"{REPO}[dev,parity]"],
                    env,
                )
        frozen = {method: freeze(python) for method, python in pythons.items()}
    first = frozen[methods[0]]
    write_report(
        "installs",
        {
            "machine": f"{host_platform.machine()}, {os.cpu_count()} cores, "
            f"Python {host_platform.python_version()}, load {os.getloadavg()[0]:.1f}",
            "uv_cache": args.uv_cache or "empty",
            "steps": steps,
            "total": {
                method: {
                    unit: round(sum(step[unit] for step in by_step.values()), 1)
                    for unit in ("wall_s", "cpu_s")
                }
                for method, by_step in steps.items()
            },
            "packages": len(first),
            "same_packages_and_versions": all(found == first for found in frozen.values()),
            "differences": {
                method: sorted(found ^ first) for method, found in frozen.items() if found != first
            },
        },
    )


if __name__ == "__main__":
    main()
