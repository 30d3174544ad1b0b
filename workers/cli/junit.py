"""JUnit XML reports (``--junit FILE``), the format CI servers draw test results from.

A run becomes one ``<testsuite>``; what its test cases are is the kind's
business: a builder registered by kind name turns the run into cases. The
default builder makes one case per step of the run detail (the smoke kind's
device / matmul / train), which fits any kind that reports steps; operator
coverage (one case per op x dtype) and stability (one per verdict reason) add
a builder with ``@case_builder("coverage")`` and nothing else changes. Every
run suite ends with a ``result`` case that carries how the run ended, so a
timeout or a lost host shows up even when no step failed. A comparison is a
suite of one case per compared number. The subset of JUnit written here is
described by tests/fixtures/junit.xsd.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List

from workers.cli.runs import exit_code
from workers.contract import exits

PASSED, FAILURE, ERROR, SKIPPED = "passed", "failure", "error", "skipped"
# XML 1.0 forbids most control characters; log lines carry ANSI escapes and worse.
_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass
class Case:
    """One ``<testcase>``: ``outcome`` is passed, failure (the job), error (the platform)
    or skipped."""

    name: str
    classname: str
    time: float = 0.0
    outcome: str = PASSED
    message: str = ""
    type: str = ""
    text: str = ""
    system_out: str = ""


@dataclass
class Suite:
    name: str
    cases: list[Case] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    timestamp: str = ""
    time: float = 0.0
    system_out: str = ""


# A builder gets the run detail and a reader of API paths (for kinds whose
# results live in endpoints of their own) and returns the run's cases.
Fetch = Callable[[str], Any]
CaseBuilder = Callable[[Dict[str, Any], Fetch], List[Case]]
_builders: dict[str, CaseBuilder] = {}


def case_builder(kind: str) -> Callable[[CaseBuilder], CaseBuilder]:
    """Register the function that turns a run of ``kind`` into test cases."""

    def register(builder: CaseBuilder) -> CaseBuilder:
        _builders[kind] = builder
        return builder

    return register


def step_cases(run: dict[str, Any], fetch: Fetch) -> list[Case]:
    """One case per step; a step repeated by a later attempt is named with its attempt."""
    steps = run.get("steps") or []
    attempts = {step.get("attempt") for step in steps}
    classname = f"npulab.{run.get('kind', 'run')}"
    cases = []
    for step in steps:
        name = str(step.get("name", "step"))
        if len(attempts) > 1:
            name += f" (attempt {step.get('attempt')})"
        outcome = {"pass": PASSED, "fail": FAILURE, "skip": SKIPPED}.get(step.get("status"), ERROR)
        detail = step.get("detail")
        cases.append(
            Case(
                name=name,
                classname=classname,
                time=float(step.get("seconds") or 0.0),
                outcome=outcome,
                message=str(step.get("error") or "") or f"step {step.get('status')}",
                type=f"step_{step.get('status')}",
                text=json.dumps(detail, indent=2, sort_keys=True) if detail else "",
                system_out=json.dumps(detail, sort_keys=True) if detail else "",
            )
        )
    return cases


def result_case(run: dict[str, Any], code: int | None = None) -> Case:
    """How the run ended, as a case: the job's fault, the platform's, or neither."""
    if code is None:
        code = exit_code(run)
    classname = f"npulab.{run.get('kind', 'run')}"
    reason = str(run.get("exit_reason") or "")
    cause = str(run.get("exit_cause") or "")
    case = Case(name="result", classname=classname, time=float(run.get("duration_s") or 0.0))
    if code == exits.CLI_SUCCEEDED:
        return case
    if code == exits.CLI_CANCELLED:
        case.outcome, case.message, case.type = SKIPPED, reason or "cancelled", "cancelled"
    elif code == exits.CLI_JOB_FAILED:
        case.outcome, case.message, case.type = FAILURE, reason or "failed", cause or "failed"
    elif code == exits.CLI_INFRASTRUCTURE:
        message = reason or run.get("status", "lost")
        case.outcome, case.message, case.type = ERROR, f"{message} (safe to retry)", cause or "lost"
    else:
        case.outcome, case.type = ERROR, "gave_up"
        case.message = f"still {run.get('status')} when the CLI stopped waiting"
    case.text = reason
    return case


def run_suite(
    run: dict[str, Any],
    fetch: Fetch,
    code: int | None = None,
    log_lines: list[str] | None = None,
) -> Suite:
    builder = _builders.get(str(run.get("kind")), step_cases)
    return Suite(
        name=f"npulab.{run.get('kind')}.run-{run.get('id')}",
        cases=[*builder(run, fetch), result_case(run, code)],
        properties=_properties(
            run,
            ("id", "kind", "name", "status", "host", "exit_cause", "snapshot", "web_url"),
        ),
        timestamp=_timestamp(run.get("started_at") or run.get("created")),
        time=float(run.get("duration_s") or 0.0),
        system_out="\n".join(log_lines or []),
    )


def compare_suite(body: dict[str, Any]) -> Suite:
    """One case per compared number; a regression is a failure."""
    kind = body.get("kind", "run")
    baseline, candidate = body.get("baseline") or {}, body.get("candidate") or {}
    cases = []
    for row in body.get("comparisons", []):
        case = Case(name=str(row.get("name")), classname=f"npulab.compare.{kind}")
        case.system_out = f"baseline {row.get('baseline')}, candidate {row.get('candidate')}" + (
            f", change {row['change']:+.2%}" if row.get("change") is not None else ""
        )
        if row.get("regression"):
            case.outcome, case.type = FAILURE, "regression"
            case.message = f"{row.get('name')} regressed: {case.system_out}"
            case.text = case.message
        cases.append(case)
    props = {
        "kind": str(kind),
        "baseline": str(baseline.get("id", "")),
        "candidate": str(candidate.get("id", "")),
        "threshold": str(body.get("threshold", "")),
        "regressions": str(body.get("regressions", "")),
    }
    return Suite(
        name=f"npulab.compare.{kind}.run-{baseline.get('id')}-vs-run-{candidate.get('id')}",
        cases=cases,
        properties=props,
    )


def to_xml(suites: list[Suite]) -> bytes:
    root = ET.Element("testsuites", name="npulab")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for suite in suites:
        counts = _counts(suite.cases)
        for key in totals:
            totals[key] += counts[key]
        total_time += suite.time
        element = ET.SubElement(
            root,
            "testsuite",
            name=_clean(suite.name),
            **{key: str(value) for key, value in counts.items()},
            time=_seconds(suite.time),
        )
        if suite.timestamp:
            element.set("timestamp", suite.timestamp)
        if suite.properties:
            properties = ET.SubElement(element, "properties")
            for name, value in suite.properties.items():
                ET.SubElement(properties, "property", name=_clean(name), value=_clean(value))
        for case in suite.cases:
            _case(element, case)
        if suite.system_out:
            ET.SubElement(element, "system-out").text = _clean(suite.system_out)
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", _seconds(total_time))
    indent = getattr(ET, "indent", None)  # Python 3.9+; one line of XML on 3.8 is as valid
    if indent is not None:
        indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def write(path: str | Path, suites: list[Suite]) -> Path:
    target = Path(path)
    if target.parent != Path(""):
        target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(to_xml(suites) + b"\n")
    return target


def _case(parent: ET.Element, case: Case) -> None:
    element = ET.SubElement(
        parent,
        "testcase",
        name=_clean(case.name),
        classname=_clean(case.classname),
        time=_seconds(case.time),
    )
    if case.outcome == SKIPPED:
        ET.SubElement(element, "skipped", message=_clean(case.message))
    elif case.outcome in (FAILURE, ERROR):
        child = ET.SubElement(
            element, case.outcome, message=_clean(case.message), type=_clean(case.type)
        )
        if case.text:
            child.text = _clean(case.text)
    if case.system_out:
        ET.SubElement(element, "system-out").text = _clean(case.system_out)


def _counts(cases: list[Case]) -> dict[str, int]:
    return {
        "tests": len(cases),
        "failures": sum(case.outcome == FAILURE for case in cases),
        "errors": sum(case.outcome == ERROR for case in cases),
        "skipped": sum(case.outcome == SKIPPED for case in cases),
    }


def _properties(run: dict[str, Any], keys: tuple[str, ...]) -> dict[str, str]:
    return {key: str(run[key]) for key in keys if run.get(key) not in (None, "")}


def _timestamp(value: Any) -> str:
    """ISO 8601 without the zone (the JUnit schema's xs:dateTime pattern has none)."""
    if not value:
        return ""
    text = str(value)
    match = re.match(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})", text)
    return match.group(1) if match else ""


def _seconds(value: float) -> str:
    return f"{max(value, 0.0):.3f}"


def _clean(text: Any) -> str:
    return _NOT_XML.sub("?", str(text))
