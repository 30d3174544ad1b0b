"""Post-training INT8 of a script's model on the CPU, with torch.ao's FX graph mode.

PT2E (``torch.ao.quantization.quantize_pt2e``) left torch for torchao; FX graph mode is
torch.ao's own and lets each module be quantized or kept in float by name, which the
sensitivity pass needs. For each quantizable layer alone: the model's output cosine and
largest error against float32 and the task metric; then the whole model; then the layers
to keep in float32 (the most harmful first, until the metric is back within the
tolerance) and the metric with them kept. Standard library and torch, Python 3.8.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable, Iterable

# Modules FX graph mode quantizes statically with the default mapping.
QUANTIZABLE = ("Linear", "Conv1d", "Conv2d", "Conv3d")
# The most layers a sensitivity pass quantizes one by one (each is a calibration).
MAX_LAYERS = 200


def _quantized(
    model: Any,
    calibration: list[Any],
    example: Any,
    only: list[str] | None = None,
    keep: Iterable[str] = (),
) -> Any:
    import torch
    from torch.ao.quantization import QConfigMapping, get_default_qconfig
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    qconfig = get_default_qconfig(torch.backends.quantized.engine)
    if only is not None:
        mapping = QConfigMapping()
        for name in only:
            mapping = mapping.set_module_name(name, qconfig)
    else:
        mapping = QConfigMapping().set_global(qconfig)
        for name in keep:
            mapping = mapping.set_module_name(name, None)
    prepared = prepare_fx(copy.deepcopy(model).eval(), mapping, (example,))
    with torch.no_grad():
        for batch in calibration:
            prepared(batch)
    return convert_fx(prepared)


def _closeness(reference: Any, output: Any) -> tuple[float | None, float | None]:
    import torch

    a = reference.detach().float().flatten()
    b = output.detach().float().flatten()
    if a.shape != b.shape or not bool(torch.isfinite(b).all()):
        return None, None
    cosine = float(torch.nn.functional.cosine_similarity(a, b, dim=0, eps=1e-12))
    return cosine, float((a - b).abs().max())


def _number(value: float) -> float | None:
    return value if math.isfinite(value) else None


def sensitivity(
    model: Any,
    calibration: list[Any],
    evaluate: Callable[[Any], float],
    tolerance: float,
) -> dict[str, Any]:
    """The INT8 report of ``model`` (float32, on the CPU): ``evaluate(model)`` gives the task
    metric (higher is better); ``calibration`` is a list of input batches, the first also
    the input whose output is compared."""
    import torch

    model = model.float().cpu().eval()
    example = calibration[0]
    with torch.no_grad():
        reference = model(example)
    baseline = float(evaluate(model))
    names = [
        name
        for name, module in model.named_modules()
        if name and type(module).__name__ in QUANTIZABLE
    ][:MAX_LAYERS]
    layers = []
    for name in names:
        alone = _quantized(model, calibration, example, only=[name])
        with torch.no_grad():
            cosine, max_abs_err = _closeness(reference, alone(example))
        metric = float(evaluate(alone))
        layers.append(
            {
                "name": name,
                "cosine": cosine,
                "max_abs_err": max_abs_err,
                "metric": _number(metric),
                "delta": _number(metric - baseline),
            }
        )
    whole = _quantized(model, calibration, example)
    with torch.no_grad():
        cosine, max_abs_err = _closeness(reference, whole(example))
    metric = float(evaluate(whole))
    delta = metric - baseline
    # The most harmful layers first, until the metric is within the tolerance.
    keep: list[str] = []
    kept_delta = delta
    harmful = sorted(
        layers, key=lambda layer: layer["delta"] if layer["delta"] is not None else -math.inf
    )
    for layer in harmful:
        if kept_delta >= -tolerance or len(keep) >= max(1, len(layers) // 2):
            break
        keep.append(layer["name"])
        kept = _quantized(model, calibration, example, keep=keep)
        kept_delta = float(evaluate(kept)) - baseline
    return {
        "engine": torch.backends.quantized.engine,
        "method": "torch.ao FX post-training static INT8",
        "fp32_metric": _number(baseline),
        "int8_metric": _number(metric),
        "delta": _number(delta),
        "cosine": cosine,
        "max_abs_err": max_abs_err,
        "tolerance": tolerance,
        "layers": layers,
        "keep": keep,
        "delta_kept": _number(kept_delta),
    }
