"""MindSpore's failures diagnosed: public samples, real captures from its CPU wheel, live runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from workers.diagnosis.ranking import diagnose
from workers.diagnosis.rules import codes_in, load_rules
from workers.diagnosis.scanner import Scanner, scan_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CORPUS = FIXTURES / "diagnosis" / "corpus"
CAPTURED = FIXTURES / "diagnosis" / "captured"
RUNNER_SAMPLES = FIXTURES / "mindspore"
PUBLIC = {
    name: expected
    for name, expected in json.loads((CORPUS / "expected.json").read_text(encoding="utf-8")).items()
    if name.startswith("mindspore-")
}
MADE_HERE = json.loads((CAPTURED / "expected.json").read_text(encoding="utf-8"))

# The fixtures' own maker, beside them (not a package).
_spec = importlib.util.spec_from_file_location("capture", CAPTURED / "capture.py")
capture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(capture)


def _diagnosis(path: Path) -> dict | None:
    scanner = Scanner(tables={})
    scanner.scan_path(str(path))
    return diagnose(scanner.hits)


def _verdict(found: dict | None) -> dict | None:
    if found is None:
        return None
    return {key: found[key] for key in ("rule", "category", "blame")} | {"code": found["root_code"]}


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_mindspore_samples_name_their_rule_category_and_blame(name):
    expected = PUBLIC[name]
    assert expected["source"].startswith("https://")
    assert _verdict(_diagnosis(CORPUS / f"{name}.log")) == {
        key: expected[key] for key in ("rule", "category", "blame", "code")
    }


@pytest.mark.parametrize("name", sorted(MADE_HERE))
def test_failures_captured_from_mindspore_on_cpu_are_diagnosed(name):
    path = CAPTURED / f"{name}.log"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# source: captured on the npulab development machine, MindSpore ")
    # No path of the machine they were made on.
    assert "/work/" not in text
    assert "/tmp/" not in text
    assert _verdict(_diagnosis(path)) == MADE_HERE[name]


def test_every_case_the_capture_script_makes_has_a_fixture_and_an_expectation():
    assert set(capture.CASES) == set(MADE_HERE) == {p.stem for p in CAPTURED.glob("*.log")}


# The runner's own samples (workers/training/mindspore_logs.py reads them too).
RUNNER_EXPECTED = {
    "MindAct-1752_E39999_aicpu-exception_Launch-kernel-failed": ("aicpu-exception", "aicore-exec"),
    "local_graph-compile-error_Unsupported-expression-Set": ("ms-graph-syntax", "graph-compile"),
    "mindocr-615_DEVICE-ERROR_507011_GetNext": ("acl-507011", "aicore-exec"),
    "mindyolo-186_DEVICE-ERROR_SyncStream-failed": ("ms-sync-stream-failed", "aicore-exec"),
    "mindyolo-273_Unsupported-device-target-Ascend_libge_runner": (
        "ms-device-target-unsupported",
        "env-missing",
    ),
}


@pytest.mark.parametrize("name", sorted(RUNNER_EXPECTED))
def test_the_runners_mindspore_samples_are_diagnosed(name):
    found = _diagnosis(RUNNER_SAMPLES / f"{name}.txt")
    assert (found["rule"], found["category"]) == RUNNER_EXPECTED[name]


def test_a_root_cann_code_outranks_mindspores_wrapper_lines():
    # MindSpore's report around a CANN error: its own lines only say a kernel failed.
    text = "\n".join(
        [
            "RuntimeError: Launch kernel failed: Default/AsStrided-op12",
            "",
            "----------------------------------------------------",
            "- Ascend Error Message:",
            "----------------------------------------------------",
            "EZ9999: Inner Error!",
            "Unsupported_Operator(EZ3003): No supported Ops kernel and engine are found for "
            "[AsStrided12], optype [AsStrided]",
            "",
            "----------------------------------------------------",
            "- C++ Call Stack: (For framework developers)",
            "----------------------------------------------------",
            "mindspore/ccsrc/runtime/graph_scheduler/actor/kernel_actor.cc:917 "
            "ExecuteLaunchKernelTask",
        ]
    )
    found = diagnose(scan_text(text, scanner=Scanner(tables={})).hits)
    assert (found["root_code"], found["category"]) == ("EZ3003", "op-unsupported")
    # Without the root code, MindSpore's line says more than CANN's wrapper.
    wrapped = "\n".join(line for line in text.splitlines() if "EZ3003" not in line)
    found = diagnose(scan_text(wrapped, scanner=Scanner(tables={})).hits)
    assert (found["rule"], found["category"]) == ("ms-launch-kernel-failed", "aicore-exec")


def test_an_unknown_mindspore_error_is_named_by_its_report_block_as_unknown():
    text = "RuntimeError: something new\n\n-------\n- C++ Call Stack: (For framework developers)\n"
    found = diagnose(scan_text(text, scanner=Scanner(tables={})).hits)
    assert (found["rule"], found["category"], found["blame"]) == (
        "ms-cxx-call-stack",
        "unknown",
        "unknown",
    )


def test_a_log_that_starts_with_mindspores_log_lines_is_read_whole_and_a_plog_still_is_not():
    ms_head = (
        "[WARNING] ME(1:2,MainProcess):2026-12-05-05:52:01.559.000 "
        "[mindspore/run_check/_check_version.py:317] Using custom Ascend AI software package\n"
    )
    body = "RuntimeError: For 'MatMulExt' op, shape1[-1] must be equal to shape2[-2], but got 3.\n"
    found = diagnose(scan_text(ms_head + body, scanner=Scanner(tables={})).hits)
    assert found["rule"] == "ms-op-check"
    plog_head = "[WARNING] GE(1,python):2026-12-05-05:52:01.559.000 [graph.cc:1] something\n"
    assert scan_text(plog_head + body, scanner=Scanner(tables={})).hits == []


def test_mindspores_retcode_is_read_as_an_acl_code():
    assert codes_in("Task fail infos task_id: 2, retcode: 507011 ( model execute failed)") == [
        "507011"
    ]


def test_mindspore_rules_use_the_contracts_vocabulary_and_name_a_source():
    rules = [rule for rule in load_rules().rules if rule.id.startswith("ms-")]
    assert len(rules) >= 15
    for rule in rules:
        assert rule.source, rule.id
        assert rule.fix, rule.id
        assert rule.meaning, rule.id


# Live: the same failures made afresh with the installed MindSpore, so the rules follow
# the wheel the hosts run, not only the frozen text (the msrun cases wait for a timeout
# and are kept to the frozen captures).
LIVE = [
    "ms-matmul-shape-pynative",
    "ms-matmul-shape-graph",
    "ms-set-context-ascend-on-cpu",
    "ms-comm-init-without-msrun",
]


@pytest.mark.parametrize("name", LIVE)
def test_the_failure_made_afresh_with_the_installed_mindspore_is_diagnosed_the_same(
    name, ms_python, tmp_path
):
    _, text = capture.run_case(name, ms_python)
    path = tmp_path / f"{name}.log"
    path.write_text(text, encoding="utf-8")
    assert _verdict(_diagnosis(path)) == MADE_HERE[name], text


@pytest.fixture(scope="module")
def ms_python() -> str:
    from tests.mindspore.interpreter import require_mindspore

    return require_mindspore()
