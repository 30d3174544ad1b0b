"""The Python environment a run executes in: interpreter, every distribution, torch_npu's import."""

from __future__ import annotations

import platform
import re
import subprocess
import sys
from importlib import metadata
from typing import Any

# Called out in snapshots and summaries; keys are normalised distribution names.
KEY_PACKAGES = ("torch", "torch-npu", "mindspore", "numpy", "torchvision", "transformers")
PROBE_TIMEOUT_S = 120
_PROBE = "import torch, torch_npu; print(torch_npu.__version__)"


def normalise(name: str) -> str:
    """PEP 503: torch_npu, Torch-NPU and torch.npu are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def collect_python(probe_torch_npu: bool = True) -> dict[str, Any]:
    packages = installed_distributions()
    info: dict[str, Any] = {
        "executable": sys.executable,
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "packages": packages,
        "key": {name: packages.get(name) for name in KEY_PACKAGES},
    }
    if "torch-npu" in packages and probe_torch_npu:
        info["torch_npu_import"] = probe_torch_npu_import()
    return info


def installed_distributions() -> dict[str, str]:
    """Normalised name -> version of every distribution this interpreter sees, sorted."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            # The first one on sys.path wins, as it does for imports.
            found.setdefault(normalise(name), dist.version)
    return dict(sorted(found.items()))


def probe_torch_npu_import(python: str | None = None) -> dict[str, Any]:
    """Import torch_npu in a child interpreter: without CANN it can kill the process."""
    try:
        done = subprocess.run(
            [python or sys.executable, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"import torch_npu did not finish in {PROBE_TIMEOUT_S} s"}
    except OSError as exc:
        return {"ok": False, "error": f"cannot run the probe: {exc}"}
    if done.returncode == 0:
        return {"ok": True, "error": None}
    return {"ok": False, "error": _last_error(done.stderr) or f"exit code {done.returncode}"}


def _last_error(stderr: str) -> str:
    """The exception line of a traceback, plus torch_npu's own ERRnnnnn line when present."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", line)]
    codes = [line for line in lines if re.search(r"\bERR\d{5}\b", line)]
    chosen = errors[-1:] + codes[-1:]
    return " | ".join(chosen) if chosen else (lines[-1] if lines else "")
