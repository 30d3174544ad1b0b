"""Training frameworks: PyTorch (the default) and MindSpore, and what a MindSpore run declares.

A training run names its ``framework``. MindSpore runs also declare the execution
``mode``, the ``amp_level``, the ``loss_scale_manager`` it defaults to and the
``save_graphs`` IR dump level; the ``device_target`` is not declared, it follows
from the run's device type. Both sides validate with ``check_fields`` so that an
invalid combination is refused at submit, naming the field, never at step one on a
host. Standard library only, Python 3.8.
"""

from __future__ import annotations

from typing import Any

from workers.contract.devices import CPU, CUDA, NPU

PYTORCH = "pytorch"
MINDSPORE = "mindspore"
FRAMEWORKS = (PYTORCH, MINDSPORE)

PYNATIVE = "pynative"
GRAPH = "graph"
MODES = (PYNATIVE, GRAPH)
AMP_LEVELS = ("O0", "O1", "O2", "O3")
# "auto": whatever MindSpore's Model picks for the amp_level (a dynamic manager for O2/O3).
LOSS_SCALE_MANAGERS = ("auto", "none", "fixed", "dynamic")
MAX_SAVE_GRAPHS = 3

# MindSpore's device_target for each device type.
DEVICE_TARGETS = {CPU: "CPU", CUDA: "GPU", NPU: "Ascend"}

# A host worker with an interpreter that has MindSpore carries this label; a MindSpore run
# needs it, so it goes only to such hosts and is refused at submit when none has it.
MINDSPORE_LABEL = "mindspore"

# Labels a host worker reports from its own configuration, and what reporting one says it
# has. Placement needs an operator's label (a worker's report never puts a host in) and,
# for these, the worker's report too: a host whose worker reports no MindSpore interpreter
# would start a MindSpore run in one without it, so its report can take it out.
WORKER_LABELS = {MINDSPORE_LABEL: "MindSpore interpreter (--mindspore-python)"}

# What the MindSpore fields are when a run does not set them (also a PyTorch run's values).
DEFAULTS = {"mode": PYNATIVE, "amp_level": "O0", "loss_scale_manager": "auto", "save_graphs": 0}


def device_target(device_type: str) -> str:
    """MindSpore's ``device_target`` for an npulab device type."""
    return DEVICE_TARGETS[device_type]


def check_fields(spec: dict[str, Any]) -> dict[str, str]:
    """What is wrong across a training spec's framework fields, by field name."""
    errors: dict[str, str] = {}
    framework = spec.get("framework", PYTORCH)
    if framework != MINDSPORE:
        for name, default in DEFAULTS.items():
            if name in spec and spec[name] != default:
                errors[name] = f"applies to framework {MINDSPORE} only (this run is {framework})"
        return errors
    amp = spec.get("amp_level", "O0")
    manager = spec.get("loss_scale_manager", "auto")
    if spec.get("device_type") == CPU and amp in ("O2", "O3") and manager in ("auto", "dynamic"):
        # MindSpore's own ValueError, at the first step: "Only loss_scale_manager=None or
        # FixedLossScaleManager(drop_overflow_update=False) are supported on device CPU".
        why = "the default for " + amp if manager == "auto" else "a dynamic one"
        errors["loss_scale_manager"] = (
            f"amp_level {amp} on a cpu device takes loss_scale_manager none or fixed: "
            f"MindSpore refuses a loss scale manager on CPU ({manager} is {why})"
        )
    return errors


def required_labels(spec: dict[str, Any]) -> list[str]:
    """Host labels a training run of this spec needs: a MindSpore run, a host with it."""
    return [MINDSPORE_LABEL] if spec.get("framework") == MINDSPORE else []
