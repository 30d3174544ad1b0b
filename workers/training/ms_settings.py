"""A MindSpore run's settings, applied before its script starts: no change to the script.

The training runner passes the spec's MindSpore fields in ``NPULAB_MS_*`` variables
(and ``save_graphs`` as MindSpore's own ``MS_DEV_SAVE_GRAPHS``); ``workers.training.launch``
calls ``prepare`` in the script's process before it runs the script:

- ``mode`` and ``device_target`` go to MindSpore's context, as a script's own
  ``set_context`` call would set them (a script that sets them itself still wins);
- ``amp_level`` and ``loss_scale_manager`` become the defaults of ``mindspore.train.Model``
  for a script that does not pass its own: they are arguments of the Model, not context.

Imports MindSpore, so only in a MindSpore run's process. Python 3.8.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from typing import Any, Mapping

from workers.contract import frameworks, script_env


class MindSporeMissing(RuntimeError):
    """The run's interpreter has no MindSpore."""


def prepare(env: Mapping[str, str]) -> str:
    """Apply the run's MindSpore settings in this process; returns a line saying which."""
    try:
        import mindspore
    except ImportError as exc:
        raise MindSporeMissing(
            f"framework mindspore, but the run's interpreter {sys.executable} has no "
            f"MindSpore ({exc}): run it on a host with the '{frameworks.MINDSPORE_LABEL}' "
            "label, or name an interpreter with MindSpore in the spec's python"
        ) from None
    mode = env.get(script_env.MS_MODE, frameworks.PYNATIVE)
    target = env.get(script_env.MS_DEVICE_TARGET, "CPU")
    mindspore.set_context(
        mode=mindspore.GRAPH_MODE if mode == frameworks.GRAPH else mindspore.PYNATIVE_MODE
    )
    mindspore.set_device(target)
    amp_level = env.get(script_env.MS_AMP_LEVEL, "O0")
    manager = env.get(script_env.MS_LOSS_SCALE_MANAGER, "auto")
    _default_model_arguments(amp_level, manager)
    graphs = env.get("MS_DEV_SAVE_GRAPHS", "")
    return (
        f"npulab: MindSpore {mindspore.__version__}, mode {mode}, device_target {target}, "
        f"amp_level {amp_level}, loss_scale_manager {manager}"
        + (f", save_graphs {graphs}" if graphs else "")
    )


def _default_model_arguments(amp_level: str, manager: str) -> None:
    """Make the spec's amp_level and loss scale manager the defaults of ``Model``."""
    from mindspore import train

    model = train.Model
    original = model.__init__
    if getattr(original, "_npulab_defaults", False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        given = signature.bind_partial(self, *args, **kwargs).arguments
        if "amp_level" not in given:
            kwargs["amp_level"] = amp_level
        if manager != "auto" and "loss_scale_manager" not in kwargs:
            kwargs["loss_scale_manager"] = _loss_scale_manager(manager)
        original(self, *args, **kwargs)

    __init__._npulab_defaults = True  # type: ignore[attr-defined]
    model.__init__ = __init__


def _loss_scale_manager(name: str) -> Any:
    from mindspore import amp

    if name == "fixed":
        # The one fixed manager MindSpore accepts on every device, CPU included.
        return amp.FixedLossScaleManager(drop_overflow_update=False)
    if name == "dynamic":
        return amp.DynamicLossScaleManager()
    return None


def environment(spec: Mapping[str, Any], run_dir: str) -> dict[str, str]:
    """The variables a MindSpore run's processes get from its spec."""
    env = {
        script_env.FRAMEWORK: frameworks.MINDSPORE,
        script_env.MS_MODE: spec["mode"],
        script_env.MS_DEVICE_TARGET: frameworks.device_target(spec["device_type"]),
        script_env.MS_AMP_LEVEL: spec["amp_level"],
        script_env.MS_LOSS_SCALE_MANAGER: spec["loss_scale_manager"],
    }
    if spec["save_graphs"]:
        env["MS_DEV_SAVE_GRAPHS"] = str(spec["save_graphs"])
        env["MS_DEV_SAVE_GRAPHS_PATH"] = os.path.join(run_dir, GRAPHS_DIR)
    return env


# Where a run's graph IR dumps go, inside its run directory.
GRAPHS_DIR = "graphs"
