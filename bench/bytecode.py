"""What a process of npulab's costs to start, compiling the checkout from source or reading
its bytecode (`make test` and `make run` write it first with compileall).

The runs' users cannot write ``__pycache__`` into the checkout, nor can any process where
``PYTHONDONTWRITEBYTECODE`` is set, so without the bytecode written beforehand each such
process compiles what it imports. Measured in a copy of the checkout (platform/, workers/,
manage.py) so that the checkout's own bytecode is left alone: the CPU (user + system) of
each process, the two states taken in turns, the median of ``--repeats``.

    .venv/bin/python bench/bytecode.py [--repeats 8]
"""

from __future__ import annotations

import argparse
import os
import platform as host_platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.common import run_for_cpu, write_report  # noqa: E402

PROCESSES = {
    "a run's supervisor (import workers.run)": ["-c", "import workers.run"],
    "the host worker (python -m workers --help)": ["-m", "workers", "--help"],
    "the CLI (python -m workers.cli --help)": ["-m", "workers.cli", "--help"],
    "a Django command (manage.py check)": ["manage.py", "check"],
}
COPIED = ("platform", "workers", "manage.py")


def cpu_of(arguments: list[str], cwd: Path, env: dict[str, str]) -> float:
    """The CPU seconds of one process of the venv's Python, run to its end."""
    return run_for_cpu([sys.executable, *arguments], cwd=cwd, env=env, capture_output=True)


def set_state(checkout: Path, compiled: bool) -> None:
    for cache in checkout.rglob("__pycache__"):
        shutil.rmtree(cache)
    if compiled:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", *COPIED], cwd=checkout, check=True
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=8)
    args = parser.parse_args()
    # Nothing the processes import may write bytecode, as on the machines that set it.
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.setdefault("NPULAB_SECRET_KEY", "bench-only")
    samples: dict[str, dict[str, list[float]]] = {
        name: {"source": [], "bytecode": []} for name in PROCESSES
    }
    with tempfile.TemporaryDirectory(prefix="npulab-bytecode-") as scratch:
        checkout = Path(scratch)
        for name in COPIED:
            source = REPO / name
            if source.is_dir():
                shutil.copytree(
                    source, checkout / name, ignore=shutil.ignore_patterns("__pycache__")
                )
            else:
                shutil.copy2(source, checkout / name)
        for repeat in range(args.repeats):
            # In turns, each state first every other round: the machine drifts.
            states = ("source", "bytecode") if repeat % 2 == 0 else ("bytecode", "source")
            for state in states:
                set_state(checkout, compiled=state == "bytecode")
                for name, arguments in PROCESSES.items():
                    samples[name][state].append(cpu_of(arguments, checkout, env))
        set_state(checkout, compiled=False)
        compiled = cpu_of(["-m", "compileall", "-q", *COPIED], checkout, env)
        again = cpu_of(["-m", "compileall", "-q", *COPIED], checkout, env)
    write_report(
        "bytecode",
        {
            "machine": f"{host_platform.machine()}, {os.cpu_count()} cores, "
            f"Python {host_platform.python_version()}, load {os.getloadavg()[0]:.1f}",
            "repeats": args.repeats,
            "cpu_s_median": {
                name: {state: round(statistics.median(v), 3) for state, v in by_state.items()}
                for name, by_state in samples.items()
            },
            "compileall_cpu_s": {"fresh": round(compiled, 2), "nothing_changed": round(again, 2)},
        },
    )


if __name__ == "__main__":
    main()
