"""Run spec documents: what a run does, as one JSON object, field by field.

The same document is the body of ``POST /api/v1/runs/`` and the file given to
``python -m workers.run``; both validate it with these fields (a kind lists
its own in its declaration, ``workers.contract.kinds``), so the platform and
a host can never disagree on what a valid spec is. Standard library only.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

from workers.contract import diagnosis
from workers.contract.capture import METRIC_PATTERNS, STDOUT_METRICS, TENSORBOARD_DIRS
from workers.contract.devices import DEVICE_TYPES, MAX_DEVICES, VISIBLE_DEVICES_ENV
from workers.contract.gang import HOSTS, MAX_HOSTS
from workers.contract.gang import RESERVED_ENV as GANG_ENV
from workers.contract.ranks import (
    ALL,
    DEFAULT_METRIC_RANKS,
    MAX_RANKS,
    METRIC_RANKS,
    clean_metric_ranks,
    ranks_problem,
)

# Keys of a submission that say where and how a run is queued, not what it
# does. The API reads them; the runner ignores them, so one file serves both.
SUBMISSION_FIELDS = ("project", "host", "labels", "name", "tags", "priority", "wait_for_host")

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Set by npulab from the spec and the device lease; a spec's env may not override them.
_RESERVED_ENV = re.compile(
    "^(NPULAB_.*|"
    + "|".join(sorted([name for name in VISIBLE_DEVICES_ENV.values() if name] + list(GANG_ENV)))
    + ")$"
)
_NO_DEFAULT = object()

# Every run carries its env and args in its spec, to every page and host that
# shows or runs it: bounded so that one spec cannot weigh megabytes.
MAX_ENV_VARIABLES = 256
MAX_ENV_VALUE_CHARS = 32 * 1024
MAX_STRINGS = 4096
MAX_STRINGS_CHARS = 64 * 1024
MAX_STRING_CHARS = 64 * 1024


def text_problem(value: str) -> str | None:
    """What makes ``value`` unstorable text (NUL, a lone surrogate), or None.

    PostgreSQL refuses both in text and jsonb; no command line holds them either.
    """
    if "\x00" in value:
        return "must not contain NUL characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode (no lone surrogates)"
    return None


def host_path_problem(value: str) -> str | None:
    """Why ``value`` is no directory a run may name: an absolute one on the host (a checkout
    of the user's code), or one inside the run directory; never climbing with '..'."""
    if ".." in value.replace("\\", "/").split("/"):
        return "must not contain '..': an absolute path on the host, or one inside the run dir"
    return None


def host_inputs(fields: list[Field], spec: dict[str, Any]) -> list[str]:
    """The host folders a spec names in its ``host_input`` fields (a file: its folder)."""
    found = []
    for field in fields:
        value = spec.get(field.name)
        if field.host_input and isinstance(value, str) and value.startswith("/"):
            found.append(value if not value.endswith(".py") else value.rsplit("/", 1)[0] or "/")
    return found


def _interpreter_problem(value: str) -> str | None:
    if value and not value.startswith("/"):
        return "must be an absolute path to a Python interpreter, or empty"
    if ".." in value.split("/"):
        return "must not contain '..'"
    return None


class SpecError(ValueError):
    """A spec failed validation; ``errors`` maps each offending field to why."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(f"{key}: {msg}" for key, msg in sorted(self.errors.items())))


class Field:
    """One key of a spec: its JSON type, default and bounds.

    ``type`` is a JSON-schema type name (integer, number, string, boolean),
    or ``env`` (an object of variable name to string), ``strings`` (a list
    of strings) or ``ranks`` (global ranks of the run, or "all").
    """

    def __init__(
        self,
        name: str,
        type: str,
        *,
        default: Any = _NO_DEFAULT,
        minimum: float | None = None,
        maximum: float | None = None,
        choices: tuple[str, ...] | None = None,
        check: Callable[[Any], str | None] | None = None,
        help: str = "",
        host_input: bool = False,
    ) -> None:
        self.name = name
        self.type = type
        self.default = default
        self.minimum = minimum
        self.maximum = maximum
        self.choices = choices
        # Says what is wrong with a well-typed value, or None when it is fine.
        self.check = check
        self.help = help
        # An absolute path here names a host folder (or a file's folder) the run reads:
        # mounted read-only in its sandbox, which mounts nothing else of the host's.
        self.host_input = host_input

    @property
    def required(self) -> bool:
        return self.default is _NO_DEFAULT

    def clean(self, value: Any) -> Any:
        """Return the value in canonical form or raise ValueError saying why not."""
        cleaner = getattr(self, "_clean_" + self.type)
        value = cleaner(value)
        if self.choices is not None and value not in self.choices:
            raise ValueError("must be one of: " + ", ".join(self.choices))
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"must be at least {_num(self.minimum)}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"must be at most {_num(self.maximum)}")
        problem = self.check(value) if self.check else None
        if problem:
            raise ValueError(problem)
        return value

    @staticmethod
    def _clean_integer(value: Any) -> int:
        # bool is an int subclass in Python; true is not a device count.
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("must be an integer")
        if isinstance(value, float) and not value.is_integer():
            raise ValueError("must be an integer")
        return int(value)

    @staticmethod
    def _clean_number(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("must be a number")
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return float(value)

    @staticmethod
    def _clean_string(value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError("must be a string")
        if len(value) > MAX_STRING_CHARS:
            raise ValueError(f"must be at most {MAX_STRING_CHARS} characters")
        problem = text_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @staticmethod
    def _clean_boolean(value: Any) -> bool:
        if not isinstance(value, bool):
            raise ValueError("must be true or false")
        return value

    def _clean_object(self, value: Any) -> Any:
        # The one object field so far is the profiling window.
        return clean_profile(value)

    @staticmethod
    def _clean_ranks(value: Any) -> Any:
        return clean_metric_ranks(value)

    @staticmethod
    def _clean_env(value: Any) -> dict[str, str]:
        if not isinstance(value, dict):
            raise ValueError("must be an object of variable name to string value")
        if len(value) > MAX_ENV_VARIABLES:
            raise ValueError(f"at most {MAX_ENV_VARIABLES} variables")
        for key, item in value.items():
            if not _ENV_NAME.match(key):
                raise ValueError(f"{key!r} is not a valid environment variable name")
            if _RESERVED_ENV.match(key):
                raise ValueError(f"{key} is set by npulab (spec fields, device lease)")
            if not isinstance(item, str):
                raise ValueError(f"value of {key} must be a string")
            if len(item) > MAX_ENV_VALUE_CHARS:
                raise ValueError(f"value of {key} must be at most {MAX_ENV_VALUE_CHARS} characters")
            problem = text_problem(item)
            if problem:
                raise ValueError(f"value of {key} {problem}")
        return dict(value)

    @staticmethod
    def _clean_strings(value: Any) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ValueError("must be a list of strings")
        if len(value) > MAX_STRINGS:
            raise ValueError(f"at most {MAX_STRINGS} items")
        if sum(len(item) for item in value) > MAX_STRINGS_CHARS:
            raise ValueError(f"at most {MAX_STRINGS_CHARS} characters in all")
        for item in value:
            problem = text_problem(item)
            if problem:
                raise ValueError(f"{item[:40]!r}: {problem}")
        return list(value)

    def describe(self) -> dict[str, Any]:
        """The field as ``GET /api/v1/kinds/`` lists it, for forms and the CLI."""
        return {
            "name": self.name,
            "type": self.type,
            "required": self.required,
            "default": None if self.required else self.default,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "choices": list(self.choices) if self.choices is not None else None,
            "help": self.help,
        }

    def json_schema(self) -> dict[str, Any]:
        if self.type == "env":
            schema: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
        elif self.type == "strings":
            schema = {"type": "array", "items": {"type": "string"}}
        elif self.type == "object":
            schema = {"type": "object", "nullable": True}
        elif self.type == "ranks":
            schema = {
                "oneOf": [
                    {"type": "string", "enum": [ALL]},
                    {
                        "type": "array",
                        "items": {"type": "integer", "minimum": 0, "maximum": MAX_RANKS - 1},
                        "minItems": 1,
                    },
                ]
            }
        else:
            schema = {"type": self.type}
        if self.choices is not None:
            schema["enum"] = list(self.choices)
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        if not self.required:
            schema["default"] = self.default
        if self.help:
            schema["description"] = self.help
        return schema


# A run that shows no progress this long is hung (docs/diagnosis.md); 0 turns it off.
DEFAULT_HANG_TIMEOUT_S = 1800


def common_fields(
    default_timeout_s: int, default_hang_timeout_s: int = DEFAULT_HANG_TIMEOUT_S
) -> list[Field]:
    """Keys every run kind accepts."""
    return [
        Field("device_type", "string", choices=DEVICE_TYPES, help="Accelerator type to run on."),
        Field(
            "devices",
            "integer",
            default=1,
            minimum=1,
            maximum=MAX_DEVICES,
            help="Devices the run leases on each host.",
        ),
        Field(
            "timeout_s",
            "integer",
            default=default_timeout_s,
            minimum=1,
            maximum=7 * 24 * 3600,
            help="Wall-clock limit; the run is killed and fails when it is exceeded.",
        ),
        Field(
            "python",
            "string",
            default="",
            check=_interpreter_problem,
            help="Absolute path of the interpreter on the host that executes the run; "
            "empty: the worker's default.",
        ),
        Field("env", "env", default={}, help="Extra environment variables for the run."),
        Field(
            diagnosis.HANG_TIMEOUT_FIELD,
            "integer",
            default=default_hang_timeout_s,
            minimum=0,
            maximum=7 * 24 * 3600,
            help="Seconds without a metric, log or checkpoint event after which the run is "
            "diagnosed hung (its stacks captured first); 0: never.",
        ),
        Field(
            diagnosis.ON_HANG_FIELD,
            "string",
            default=diagnosis.ON_HANG_FAIL,
            choices=diagnosis.ON_HANG,
            help="What a hang does: fail the run, requeue it (a restartable failure), or keep "
            "it running with the diagnosis recorded.",
        ),
        Field(
            diagnosis.STOP_ON_NAN_FIELD,
            "boolean",
            default=False,
            help="End the run at the first NaN/Inf in a tracked loss.",
        ),
        *capture_fields(),
    ]


def capture_fields() -> list[Field]:
    """How metrics are taken from a script that does not use workers.track (docs/metrics.md)."""
    return [
        Field(
            TENSORBOARD_DIRS,
            "strings",
            default=[],
            check=_directories_problem,
            help="Directories whose TensorBoard event files become metrics; empty: the run's "
            "working directory.",
        ),
        Field(
            METRIC_PATTERNS,
            "strings",
            default=[],
            check=_patterns_problem,
            help="Regular expressions with named groups that replace the default recogniser of "
            "printed metrics; a group named step gives the step.",
        ),
        Field(
            STDOUT_METRICS,
            "boolean",
            default=True,
            help="Take metrics from the lines the script prints.",
        ),
    ]


def _directories_problem(value: list[str]) -> str | None:
    for item in value:
        problem = host_path_problem(item) if item else "must not be empty"
        if problem:
            return f"{item!r} {problem}"
    return None


def _patterns_problem(value: list[str]) -> str | None:
    for item in value:
        try:
            compiled = re.compile(item)
        except re.error as exc:
            return f"{item[:60]!r} is not a regular expression: {exc}"
        if not [name for name in compiled.groupindex if name != "step"]:
            return f"{item[:60]!r} needs a named group, such as (?P<loss>[0-9.]+)"
    return None


# A run's profiling window (docs/profiles.md): torch.profiler's schedule vocabulary, the
# recording options, and torch_npu's _ExperimentalConfig on an NPU.
PROFILE_FIELD = "profile"
PROFILE_LEVELS = ("Level0", "Level1", "Level2")
# torch_npu.profiler.AiCMetrics member names (Level0 records none whatever is asked).
AIC_METRICS = (
    "AiCoreNone",
    "PipeUtilization",
    "ArithmeticUtilization",
    "Memory",
    "MemoryL0",
    "MemoryUB",
    "ResourceConflictRatio",
    "L2Cache",
    "MemoryAccess",
)
PROFILE_DEFAULTS: dict[str, Any] = {
    "wait": 1,
    "warmup": 1,
    "active": 3,
    "repeat": 1,
    "record_shapes": False,
    "with_stack": False,
    "profile_memory": False,
    "level": "Level1",
    "aic_metrics": "AiCoreNone",
    # Which ranks of a multi-process run record the window: each its own traces.
    "ranks": ALL,
}
_PROFILE_INTEGERS = {
    "wait": (0, 10000),
    "warmup": (0, 10000),
    "active": (1, 1000),
    "repeat": (1, 100),
}
_PROFILE_CHOICES = {"level": PROFILE_LEVELS, "aic_metrics": AIC_METRICS}


def clean_profile(value: Any) -> dict[str, Any] | None:
    """A profiling window with its defaults filled in; None (no profiling) stays None."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError('must be an object such as {"wait": 1, "warmup": 1, "active": 3}')
    unknown = sorted(key for key in value if key not in PROFILE_DEFAULTS)
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(unknown)}; known: {', '.join(PROFILE_DEFAULTS)}"
        )
    clean = dict(PROFILE_DEFAULTS)
    for key, item in value.items():
        if key in _PROFILE_INTEGERS:
            low, high = _PROFILE_INTEGERS[key]
            if isinstance(item, bool) or not isinstance(item, int) or not low <= item <= high:
                raise ValueError(f"{key} must be an integer from {low} to {high}")
        elif key in _PROFILE_CHOICES:
            if item not in _PROFILE_CHOICES[key]:
                raise ValueError(f"{key} must be one of: {', '.join(_PROFILE_CHOICES[key])}")
        elif key == "ranks":
            try:
                item = clean_metric_ranks(item)
            except ValueError as exc:
                raise ValueError(f"ranks {exc}") from None
        elif not isinstance(item, bool):
            raise ValueError(f"{key} must be true or false")
        clean[key] = item
    return clean


def profiled_steps(profile: dict[str, Any]) -> int:
    """Steps a loop must run for the whole window to be recorded (every repeat)."""
    return (profile["wait"] + profile["warmup"] + profile["active"]) * profile["repeat"]


def profile_field() -> Field:
    """The ``profile`` key that smoke and training runs (any kind that loops) accept."""
    return Field(
        PROFILE_FIELD,
        "object",
        default=None,
        help="Profile a window of the training loop: {wait, warmup, active, repeat} steps "
        "(torch.profiler.schedule), record_shapes, with_stack, profile_memory; on an NPU also "
        'level (Level0-2) and aic_metrics; ranks: the ranks that record it ("all", or a '
        "list). Empty: no profiling.",
    )


def hosts_field() -> Field:
    """The ``hosts`` key of a kind whose runs may span hosts (training, collectives)."""
    return Field(
        HOSTS,
        "integer",
        default=1,
        minimum=1,
        maximum=MAX_HOSTS,
        help="Hosts the run spans, each with `devices` devices (one rank per device); "
        "all are leased together.",
    )


def metric_ranks_field() -> Field:
    """The ``metric_ranks`` key of a kind whose every rank may log metrics (training)."""
    return Field(
        METRIC_RANKS,
        "ranks",
        default=list(DEFAULT_METRIC_RANKS),
        help='Global ranks whose metrics are stored, or "all": each other rank\'s as series '
        "of their own (loss@rank3); rank 0's are the run's own and always stored.",
    )


def ranks_errors(fields: list[Field], spec: dict[str, Any]) -> dict[str, str]:
    """Each ``ranks`` field of a clean ``spec`` that names a rank the run does not have."""
    world_size = spec.get(HOSTS, 1) * spec.get("devices", 1)
    errors = {}
    for field in fields:
        if field.type == "ranks":
            problem = ranks_problem(spec[field.name], world_size)
            if problem:
                errors[field.name] = problem
        elif field.name == PROFILE_FIELD and spec.get(PROFILE_FIELD):
            # The profiling window names the ranks that record it.
            problem = ranks_problem(spec[PROFILE_FIELD]["ranks"], world_size)
            if problem:
                errors[field.name] = f"ranks: {problem}"
    return errors


def split_submission(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Separate a submission into (spec, queueing fields)."""
    spec = {key: value for key, value in doc.items() if key not in SUBMISSION_FIELDS}
    submission = {key: value for key, value in doc.items() if key in SUBMISSION_FIELDS}
    return spec, submission


def clean_fields(fields: list[Field], doc: dict[str, Any], kind_name: str) -> dict[str, Any]:
    """``doc`` with defaults filled in, or SpecError naming every bad or unknown field."""
    by_name = {field.name: field for field in fields}
    errors: dict[str, str] = {}
    clean: dict[str, Any] = {}
    for field in fields:
        if field.name not in doc:
            if field.required:
                errors[field.name] = "this field is required"
            else:
                clean[field.name] = _copy(field.default)
            continue
        try:
            clean[field.name] = field.clean(doc[field.name])
        except SpecError as exc:  # an object's own keys: "b.dtype"
            errors.update({f"{field.name}.{key}": why for key, why in exc.errors.items()})
        except ValueError as exc:
            errors[field.name] = str(exc)
    for key in doc:
        if key not in by_name:
            errors[key] = f"unknown field for a {kind_name} run"
    if errors:
        raise SpecError(errors)
    return clean


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    return value


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
