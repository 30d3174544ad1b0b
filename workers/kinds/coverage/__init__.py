"""The coverage kind: which operators and dtypes work on this device stack, op by op.

Each op × variant × dtype of the chosen op set runs on the device against a
reference (the CPU result for a device run; float64 for a CPU run) and is
classified. Ops run in child processes, so one that crashes or hangs is
recorded as such and the others' results are kept. The platform stores the
matrix per run and compares two runs (a known-good stack's and a candidate's).
"""

from __future__ import annotations

from workers.contract.entries import check_entry
from workers.contract.events import EventType
from workers.contract.exits import Cause
from workers.contract.kinds import Kind
from workers.contract.spec import Field, common_fields

OP_SETS = ("opinfo", "model", "list")
OPINFO, MODEL, LIST = OP_SETS
SAMPLES = ("first", "all")
# Dtypes by torch's own names (torch.float32 is "float32"), in the order the
# matrix shows them: the common ones first, then what op_db also claims.
DTYPES = (
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "complex128",
    "complex64",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
    "complex32",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "uint16",
    "uint32",
    "uint64",
)

# How one op × dtype ended, from best to worst. A cell is as good as its worst sample.
PASS, MISMATCH, UNSUPPORTED, FALLBACK, ERROR, CRASH, TIMEOUT = (
    "pass",
    "mismatch",
    "unsupported",
    "fallback",
    "error",
    "crash",
    "timeout",
)
# Ran and matched in a dtype OpInfo does not claim for the device ("works, unclaimed"):
# not a pass, which would say the dtype is meant to work there.
UNCLAIMED = "unclaimed"
# Every sample had no elements, so the kernel's dtype dispatch never ran: nothing decided.
UNTESTED = "untested"
STATUSES = (PASS, UNCLAIMED, FALLBACK, MISMATCH, UNSUPPORTED, ERROR, CRASH, TIMEOUT, UNTESTED)
# The statuses that say the op works in the dtype: a change between them is no regression.
WORKING = (PASS, UNCLAIMED)
# How a page or a report names a status where its name alone is not enough.
STATUS_TEXT = {UNCLAIMED: "works, unclaimed", UNTESTED: "untested (only empty samples)"}
# The autograd check of an op is a row of its own, beside the forward one.
FORWARD, BACKWARD = "forward", "backward"
PASSES = (FORWARD, BACKWARD)

OP_RESULT = "op_result"
COVERAGE_PLAN = "coverage_plan"

# The operator database could not be imported in the run's interpreter
# (torch.testing._internal needs expecttest); the reason names the module.
OP_DB_UNAVAILABLE = "op_db_unavailable"
# The model entry failed while its ops were being recorded: the user's script.
CAPTURE_FAILED = "capture_failed"


def _check_dtypes(value: list[str]) -> str | None:
    unknown = [name for name in value if name not in DTYPES]
    if not unknown:
        return None
    return "unknown dtype(s) " + ", ".join(unknown) + "; known: " + ", ".join(DTYPES)


def check_spec(spec: dict) -> dict[str, str]:
    """The fields an op set needs, and none it would ignore silently."""
    errors = {}
    if spec["op_set"] == LIST and not spec["ops"]:
        errors["ops"] = "op_set list needs the op names to test"
    if spec["op_set"] != LIST and spec["ops"]:
        errors["ops"] = "only op_set list takes op names"
    if spec["op_set"] == MODEL and not spec["entry"]:
        errors["entry"] = "op_set model needs the entry whose ops are recorded"
    if spec["op_set"] != MODEL and spec["entry"]:
        errors["entry"] = "only op_set model runs an entry"
    if spec["op_set"] == MODEL:
        # A model's run tests exactly the calls it recorded, each recorded signature a sample.
        for name in ("include", "exclude"):
            if spec[name]:
                errors[name] = "op_set model tests the ops the entry called; filter with dtypes"
        if spec["backward"]:
            errors["backward"] = "op_set model records the backward ops and tests them as ops"
    return errors


FIELDS = [
    *common_fields(default_timeout_s=2 * 3600, default_hang_timeout_s=1800),
    Field(
        "op_set",
        "string",
        default=OPINFO,
        choices=OP_SETS,
        help="opinfo: PyTorch's operator database; model: the ops an entry calls; list: ops.",
    ),
    Field(
        "include",
        "strings",
        default=[],
        help="Name patterns to test (fnmatch, e.g. nn.functional.*); empty: all.",
    ),
    Field("exclude", "strings", default=[], help="Name patterns to leave out."),
    Field("ops", "strings", default=[], help="Op names for op_set list (OpInfo names, e.g. add)."),
    Field(
        "entry",
        "string",
        default="",
        check=lambda entry: check_entry(entry) if entry else None,
        help="For op_set model: path/to/script.py, package.module:function or builtin:lm.",
    ),
    Field("args", "strings", default=[], help="Arguments for the entry."),
    Field(
        "capture_steps",
        "integer",
        default=3,
        minimum=1,
        maximum=100000,
        help="For op_set model: optimizer steps recorded before the capture stops.",
    ),
    Field(
        "capture_s",
        "number",
        default=120.0,
        minimum=1,
        maximum=24 * 3600,
        help="For op_set model: seconds recorded at most.",
    ),
    Field(
        "dtypes",
        "strings",
        default=[],
        check=_check_dtypes,
        help="Dtypes to test, each tested even where an op does not claim it; "
        "empty: every dtype each op claims for the device type.",
    ),
    Field("backward", "boolean", default=False, help="Check gradients where the op has them."),
    Field("samples", "string", default="first", choices=SAMPLES, help="Sample inputs per op."),
    Field(
        "batch_size",
        "integer",
        default=64,
        minimum=1,
        maximum=100000,
        help="Cases sent to a child process at a time.",
    ),
    Field(
        "op_timeout_s",
        "number",
        default=60.0,
        minimum=0.1,
        maximum=24 * 3600,
        help="A case running longer is killed with its child and recorded as timeout.",
    ),
    Field(
        "processes",
        "integer",
        default=0,
        minimum=0,
        maximum=64,
        help="Child processes testing at once; 0: one per device (cpu: up to 4 cores).",
    ),
    Field("seed", "integer", default=0, minimum=0, maximum=2**31 - 1),
]

KIND = Kind(
    "coverage",
    "Operator coverage: which ops and dtypes work on this device stack.",
    "workers.kinds.coverage.runner",
    FIELDS,
    causes=(
        Cause(OP_DB_UNAVAILABLE, "Operator database unavailable"),
        Cause(CAPTURE_FAILED, "Model capture failed"),
    ),
    event_types=(
        EventType(
            COVERAGE_PLAN,
            {"op_set": ("string",), "total": ("integer",), "ops": ("array",)},
            ("total",),
            "how many results the run will report; for op_set model, the ops it recorded",
        ),
        EventType(
            OP_RESULT,
            {
                "op": ("string",),
                "variant": ("string",),
                "dtype": ("string",),
                "pass": ("string",),
                "status": ("string",),
                "error": ("string", "null"),
                "max_abs_err": ("number", "null"),
                "max_rel_err": ("number", "null"),
                "seconds": ("number",),
                "samples": ("integer",),
                "detail": ("object",),
            },
            ("op", "dtype", "status"),
            "one op × variant × dtype (× pass) and how it ended",
        ),
    ),
    check=check_spec,
)
