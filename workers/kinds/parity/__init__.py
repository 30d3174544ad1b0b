"""The parity kind: does a model compute the same on side B as on side A?

One run executes the same script twice, as side ``a`` and side ``b``, with the
same seed and inputs; each side may change the device type, the dtype or AMP
level and the environment, and its host (by name, pool or labels: then each side
runs on a host of its own, side A's dump handed to side B's host through the
platform, which compares). Both sides dump their layers' forward and backward
tensors with msprobe (``mindstudio-probe``, in the run's interpreter); msprobe
compares them, and the runner applies npulab's thresholds (msprobe's own
``Result`` column is no verdict): the first layer in execution order that breaks
one is named with its call site in the script. A script that reports a loss per
step gets loss-curve parity too. Standard library and ``workers.contract`` only,
Python 3.8: the platform imports this to validate submissions.
"""

from __future__ import annotations

import math
import re
from typing import Any

from workers.contract.capabilities import HANDOFF
from workers.contract.devices import DEVICE_TYPES
from workers.contract.events import EventType
from workers.contract.exits import Cause
from workers.contract.gang import PLACEMENT_FIELDS
from workers.contract.kinds import Kind
from workers.contract.spec import (
    Field,
    clean_fields,
    common_fields,
    host_path_problem,
)

PARITY = "parity"
SIDES = ("a", "b")
# The side each node rank runs when the sides are on hosts of their own. Node rank 0's
# result is the run's (its host's snapshot the run's stack), so side B, which compares
# and reports, is node 0; side A, the reference, is node 1 and hands its dump to it.
NODE_SIDES = ("b", "a")
# The file side A hands to side B's host: its dump and losses (a tar of parity/a/).
HANDOFF_FILE = "parity-side-a.tar"
# One row of the per-layer comparison (forward or backward of one module or API call).
LAYER = "parity_layer"
# A layer row: the event's fields, in the order the API, the exports and the page show them.
LAYER_FIELDS = {
    "index": ("integer",),
    "name": ("string",),
    "dtype_a": ("string",),
    "dtype_b": ("string",),
    "shape_a": ("string",),
    "shape_b": ("string",),
    "cosine": ("number", "null"),
    "euc_dist": ("number", "null"),
    "max_abs_err": ("number", "null"),
    "max_rel_err": ("number", "null"),
    "one_thousandth_ratio": ("number", "null"),
    "five_thousandth_ratio": ("number", "null"),
    "broken": ("array",),
    "nan": ("boolean",),
    "stack": ("array",),
}

# Exit causes: a broken threshold is the finding itself (like a failed stability verdict),
# never an infrastructure failure, never restarted.
DIVERGED = "parity_diverged"
SIDE_FAILED = "parity_side_failed"
SHAPE_MISMATCH = "parity_shape_mismatch"
NOT_COMPARABLE = "parity_not_comparable"

DTYPES = ("float32", "float16", "bfloat16")
AMP_LEVELS = ("O0", "O1", "O2")
LEVELS = ("L0", "L1", "mix")
BUILTIN_MLP = "builtin:mlp"
_MODULE_ENTRY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")

# npulab's thresholds by the compared dtype (the less precise of the two sides):
# (max_rel_err upper bound, one-thousandth-ratio lower bound); the cosine bound is the same
# for all. msprobe's MaxRelativeErr is the largest |b - a| / |a| of any element, so an
# element near zero makes it large even in a tensor that matches (cosine 0.99998 with a
# max relative error of 1800 in bfloat16): its bounds catch gross errors only. The
# thousandth ratio (the share of elements within 0.1 % relative error) is the strict test
# for float32; float16 rounds at ~0.05 % and bfloat16 at ~0.4 %, so for them it is loose
# or unbounded and the cosine decides. docs/parity.md has them; the spec overrides each.
COSINE_MIN = 0.99
DTYPE_THRESHOLDS = {
    "float32": (1.0, 0.99),
    "float16": (1e3, 0.2),
    "bfloat16": (1e4, 0.0),
}
# Loss-curve parity: the largest |loss_b - loss_a| / |loss_a| of one step allowed.
LOSS_RTOL = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 2e-2}
# Dumps beyond this many bytes (one side's) fall back to statistics only.
DEFAULT_MAX_DUMP_MB = 512
MAX_LAYERS = 100000


def less_precise(a: str, b: str) -> str:
    """The dtype whose thresholds a comparison of ``a`` and ``b`` uses."""
    order = ("float32", "float16", "bfloat16")
    return max(a, b, key=order.index)


def _check_entry(entry: str) -> str | None:
    if entry == BUILTIN_MLP:
        return None
    if entry.endswith(".py"):
        if ".." in entry.replace("\\", "/").split("/"):
            return "must not contain '..': an absolute path, or a path inside the run directory"
        return None
    if _MODULE_ENTRY.match(entry):
        return None
    return f"a script path ending in .py, package.module:function or {BUILTIN_MLP}"


def loss_parity(
    losses_a: dict[int, float | None], losses_b: dict[int, float | None], rtol: float
) -> dict[str, Any]:
    """The steps both sides logged: the largest relative difference and the first step past
    ``rtol``. A step whose loss is not finite on one side only is past any tolerance."""
    steps = sorted(losses_a.keys() & losses_b.keys())
    largest, first_past = 0.0, None
    for step in steps:
        a, b = losses_a[step], losses_b[step]
        if a is None and b is None:
            diff = 0.0
        elif a is None or b is None:
            diff = math.inf
        else:
            diff = abs(b - a) / max(abs(a), 1e-12) if a != b else 0.0
        largest = max(largest, diff)
        if diff > rtol and first_past is None:
            first_past = step
    return {
        "steps": len(steps),
        "max_rel_diff": largest if math.isfinite(largest) else None,
        "first_step_past_tolerance": first_past,
        "tolerance": rtol,
        "only_a": len(losses_a.keys() - losses_b.keys()),
        "only_b": len(losses_b.keys() - losses_a.keys()),
    }


SIDE_FIELDS = [
    Field(
        "device_type",
        "string",
        default="",
        choices=("", *DEVICE_TYPES),
        help="The side's device type: the run's (empty) or cpu (a CPU reference); on a "
        "host of its own, that host's.",
    ),
    Field("dtype", "string", default="float32", choices=DTYPES, help="The model's dtype."),
    Field(
        "amp_level",
        "string",
        default="O0",
        choices=AMP_LEVELS,
        help="O0: no autocast; O1/O2: autocast to the side's dtype (float16 or bfloat16).",
    ),
    Field("env", "env", default={}, help="Environment variables of this side only."),
    Field(
        "host",
        "string",
        default="",
        help="The host this side runs on; empty: the run's. A side naming a host, pool or "
        "labels puts each side on a host of its own.",
    ),
    Field("pool", "string", default="", help="A pool of the run's project its host is in."),
    Field("labels", "strings", default=[], help="Labels its host carries (the run's: empty)."),
]
SIDE_KEYS = tuple(field.name for field in SIDE_FIELDS)


class SideField(Field):
    """A side of the comparison: an object of the keys of ``SIDE_FIELDS``."""

    def __init__(self, name: str, help: str) -> None:
        defaults = {field.name: field.default for field in SIDE_FIELDS}
        super().__init__(name, "object", default=defaults, help=help)

    def clean(self, value: Any) -> Any:
        if value is None:  # an empty box of the submit form: the defaults
            value = {}
        if not isinstance(value, dict):
            raise ValueError("must be an object with " + ", ".join(SIDE_KEYS))
        # A bad key raises SpecError, which the spec names as "<side>.<key>".
        return clean_fields(SIDE_FIELDS, value, f"side {self.name} of a parity")

    def json_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {field.name: field.json_schema() for field in SIDE_FIELDS},
            "additionalProperties": False,
            "default": self.default,
            "description": self.help,
        }


def side_thresholds(spec: dict[str, Any]) -> dict[str, float]:
    """The thresholds a run applies: the spec's, or its compared dtype's defaults."""
    dtype = less_precise(spec["a"]["dtype"], spec["b"]["dtype"])
    max_rel, ratio = DTYPE_THRESHOLDS[dtype]
    return {
        "dtype": dtype,
        "cosine_min": spec["cosine_min"] or COSINE_MIN,
        "max_rel_err": spec["max_rel_err"] or max_rel,
        "thousandth_ratio_min": spec["thousandth_ratio_min"] or ratio,
        "loss_rtol": spec["loss_rtol"] or LOSS_RTOL[dtype],
    }


def apart(spec: dict[str, Any]) -> bool:
    """Whether the sides run on hosts of their own: a side names a host, pool or labels."""
    return any(spec[side][key] for side in SIDES for key in PLACEMENT_FIELDS)


def side_role(side: str) -> str:
    """How a placement of a side on a host of its own is named: "side b"."""
    return f"side {side}"


def placements(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The sides on hosts of their own, node rank 0 (side B) first; [] when they share one."""
    if not apart(spec):
        return []
    return [
        {
            "field": side,
            "role": side_role(side),
            "device_type": spec[side]["device_type"],
            **{key: spec[side][key] for key in PLACEMENT_FIELDS},
        }
        for side in NODE_SIDES
    ]


def check_spec(spec: dict[str, Any]) -> dict[str, str]:
    errors = {}
    if bool(spec["dump_a"]) != bool(spec["dump_b"]):
        errors["dump_b" if spec["dump_a"] else "dump_a"] = "give both dumps, or neither"
    if not spec["entry"] and not spec["dump_a"]:
        errors["entry"] = "this field is required (or dump_a and dump_b)"
    for side in SIDES:
        values = spec[side]
        # On a shared host the run leases devices of its own device_type; the CPU needs no
        # lease. A side on a host of its own leases that host's devices of its type.
        if not apart(spec) and values["device_type"] not in ("", "cpu", spec["device_type"]):
            errors[f"{side}.device_type"] = (
                f"{values['device_type']}: a side runs on the run's device type "
                f"({spec['device_type']}) or the CPU, unless the sides name hosts of their own "
                "(host, pool or labels)"
            )
        elif values["amp_level"] != "O0" and values["dtype"] == "float32":
            errors[f"{side}.amp_level"] = "O1/O2 autocasts to dtype: give float16 or bfloat16"
        if spec["dump_a"] and not errors.get("dump_b"):
            named = [key for key in PLACEMENT_FIELDS if values[key]]
            if named:
                errors[f"{side}.{named[0]}"] = (
                    "dumps that exist (dump_a, dump_b) are compared on one host: "
                    "name the run's host instead"
                )
    return errors


FIELDS = [
    *common_fields(default_timeout_s=3600),
    Field(
        "entry",
        "string",
        default="",
        check=lambda entry: _check_entry(entry) if entry else None,
        # A script on the host: the sandbox lets the run read its folder.
        host_input=True,
        help=f"The model script (path/to/script.py or package.module:function), or "
        f"{BUILTIN_MLP} (an MLP of `layers` linear layers).",
    ),
    Field("args", "strings", default=[], help="Arguments for the script."),
    Field(
        "dump_a",
        "string",
        default="",
        check=host_path_problem,
        host_input=True,
        help="Parity of dumps that exist (no script runs): side A's msprobe step folder "
        "on the host (.../dump/step0 of an earlier parity run, or a dump taken by hand).",
    ),
    Field(
        "dump_b",
        "string",
        default="",
        check=host_path_problem,
        host_input=True,
        help="Side B's, with dump_a.",
    ),
    SideField(
        "a", "Side A, the reference: device_type, dtype, amp_level, env, host, pool, labels."
    ),
    SideField(
        "b", "Side B, compared with A: device_type, dtype, amp_level, env, host, pool, labels."
    ),
    Field("seed", "integer", default=0, minimum=0, maximum=2**31 - 1),
    Field(
        "steps",
        "integer",
        default=1,
        minimum=1,
        maximum=100000,
        help="Training steps each side runs (loss-curve parity); layers are dumped at step 0.",
    ),
    Field("level", "string", default="L1", choices=LEVELS, help="msprobe dump level."),
    Field(
        "layers",
        "integer",
        default=8,
        minimum=1,
        maximum=1000,
        help=f"Linear layers of {BUILTIN_MLP}.",
    ),
    Field(
        "max_dump_mb",
        "integer",
        default=DEFAULT_MAX_DUMP_MB,
        minimum=1,
        maximum=1024 * 1024,
        help="A side's tensor dump beyond this falls back to statistics only (no cosine).",
    ),
    Field(
        "int8",
        "boolean",
        default=False,
        help="Also the INT8 check: post-training INT8 on the CPU (the script calls "
        "parity.int8_check), per-layer sensitivity, the layers to keep in float32.",
    ),
    Field(
        "int8_tolerance",
        "number",
        default=0.01,
        minimum=0,
        maximum=1e9,
        help="How far the task metric may fall below float32's under INT8.",
    ),
    Field("cosine_min", "number", default=0.0, minimum=0, maximum=1, help="0: 0.99."),
    Field(
        "max_rel_err",
        "number",
        default=0.0,
        minimum=0,
        maximum=1e9,
        help="Upper bound of a layer's max relative error; 0: the compared dtype's.",
    ),
    Field(
        "thousandth_ratio_min",
        "number",
        default=0.0,
        minimum=0,
        maximum=1,
        help="Lower bound of the share of elements within 0.1 % relative error; "
        "0: the compared dtype's.",
    ),
    Field(
        "loss_rtol",
        "number",
        default=0.0,
        minimum=0,
        maximum=1e9,
        help="Largest relative loss difference of a step; 0: the compared dtype's.",
    ),
]

KIND = Kind(
    PARITY,
    "Parity: does the model compute the same on side B as on side A (device, dtype, stack)?",
    "workers.kinds.parity.runner",
    FIELDS,
    causes=(
        Cause(DIVERGED, "A layer or the loss broke a parity threshold"),
        Cause(SIDE_FAILED, "A side of the parity run failed"),
        Cause(SHAPE_MISMATCH, "The sides' layers differ in shape"),
        Cause(NOT_COMPARABLE, "The sides' dumps could not be compared"),
    ),
    event_types=(
        EventType(
            LAYER,
            LAYER_FIELDS,
            ("index", "name"),
            "one layer's forward or backward output, side B against side A",
        ),
    ),
    check=check_spec,
    # Side A's dump reaches side B's host, when they are apart, as a handoff file.
    capabilities=(HANDOFF,),
    placements=placements,
)
