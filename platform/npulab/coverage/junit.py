"""A coverage comparison as JUnit XML: one testcase per op × dtype of the candidate.

CI servers draw this natively. A regression is a ``<failure>``; a cell that
does not pass but passed nowhere before (unchanged, changed, new) is
``<skipped>`` with its status, so the build fails on regressions only, and
the report still shows every known gap. The subset of JUnit written here is
the one in tests/fixtures/junit.xsd.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from npulab.coverage.compare import MISSING, REGRESSIONS, CellChange, CoverageComparison
from npulab.coverage.models import op_family
from workers.kinds.coverage import FORWARD, STATUS_TEXT, UNCLAIMED, WORKING

# XML 1.0 forbids most control characters; an op's error text may hold any.
_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
MAX_TEXT = 2000


def _xml(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)[:MAX_TEXT]


def _case_name(change: CellChange) -> str:
    name = f"{change.label} {change.dtype}"
    return name if change.phase == FORWARD else f"{name} {change.phase}"


def junit_xml(comparison: CoverageComparison) -> bytes:
    baseline, candidate = comparison.baseline, comparison.candidate
    changes = [
        (group, change)
        for group, items in comparison.groups.items()
        if group != MISSING
        for change in items
    ]
    changes.sort(key=lambda item: (item[1].op, item[1].variant, item[1].dtype, item[1].phase))
    failures = sum(group == REGRESSIONS for group, _ in changes)
    skipped = sum(
        group != REGRESSIONS and change.candidate.status not in WORKING for group, change in changes
    )
    total_time = sum(change.seconds for _, change in changes)
    totals = {
        "tests": str(len(changes)),
        "failures": str(failures),
        "errors": "0",
        "skipped": str(skipped),
        "time": f"{total_time:.3f}",
    }
    root = ET.Element("testsuites", {"name": "npulab coverage", **totals})
    suite = ET.SubElement(
        root,
        "testsuite",
        {"name": f"coverage run #{candidate.pk} against #{baseline.pk}", **totals},
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("baseline_run", str(baseline.pk)),
        ("candidate_run", str(candidate.pk)),
        ("device_type", candidate.device_type),
        *((group, str(count)) for group, count in comparison.counts.items()),
    ):
        ET.SubElement(properties, "property", {"name": name, "value": value})
    for group, change in changes:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "name": _xml(_case_name(change)),
                "classname": _xml(f"coverage.{op_family(change.op)}"),
                "time": f"{max(change.seconds, 0.0):.3f}",
            },
        )
        after = change.candidate
        if group == REGRESSIONS:
            failure = ET.SubElement(
                case,
                "failure",
                {
                    "type": after.status,
                    "message": _xml(f"passed in run #{baseline.pk}, {after.status} now"),
                },
            )
            failure.text = _xml(after.error or _errors(after.max_abs_err, after.max_rel_err))
        elif after.status == UNCLAIMED:
            # It passes, and says it is a dtype OpInfo does not claim here.
            out = ET.SubElement(case, "system-out")
            out.text = _xml(f"{STATUS_TEXT[UNCLAIMED]} ({group})")
        elif after.status not in WORKING:
            ET.SubElement(
                case,
                "skipped",
                {"message": _xml(f"{after.status} ({group}): {after.error}"[:MAX_TEXT])},
            )
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _errors(abs_err: float | None, rel_err: float | None) -> str:
    parts = []
    if abs_err is not None:
        parts.append(f"max abs error {abs_err:.3g}")
    if rel_err is not None:
        parts.append(f"max rel error {rel_err:.3g}")
    return ", ".join(parts)
