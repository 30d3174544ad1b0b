"""The knowledge base against real logs from public sources (tests/fixtures/diagnosis/corpus)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workers.diagnosis import diagnose_paths
from workers.diagnosis.ranking import diagnose
from workers.diagnosis.rules import load_rules
from workers.diagnosis.scanner import Scanner

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "diagnosis" / "corpus"
EXPECTED = json.loads((CORPUS / "expected.json").read_text(encoding="utf-8"))
SHARED = Path(__file__).resolve().parents[2] / "fixtures" / "ascend" / "errors" / "samples"
# Real MindSpore failures made on this machine (tests/fixtures/diagnosis/captured/README.md).
CAPTURED = CORPUS.parent / "captured"


def _diagnosis(name: str) -> dict | None:
    scanner = Scanner(tables={})
    scanner.scan_path(str(CORPUS / f"{name}.log"))
    return diagnose(scanner.hits)


def test_every_case_names_its_public_source_on_its_first_line():
    for name, expected in EXPECTED.items():
        first = (CORPUS / f"{name}.log").read_text(encoding="utf-8").splitlines()[0]
        assert first == f"# source: {expected['source']}"
        assert expected["source"].startswith("https://")


def test_root_code_and_category_are_right_for_at_least_95_percent_of_the_corpus():
    misses = []
    for name, expected in EXPECTED.items():
        found = _diagnosis(name)
        got = (found["root_code"], found["category"]) if found else (None, None)
        if got != (expected["code"], expected["category"]):
            misses.append((name, expected["code"], expected["category"], got))
    accuracy = 1 - len(misses) / len(EXPECTED)
    assert accuracy >= 0.95, misses


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_case_quotes_its_evidence_with_file_line_and_text(name):
    found = _diagnosis(name)
    assert found is not None
    first = found["evidence"][0]
    lines = (CORPUS / f"{name}.log").read_text(encoding="utf-8").splitlines()
    assert first["file"].endswith(f"{name}.log")
    # The quoted text is the line's own (a JSON-escaped log's piece of it).
    assert first["text"][:60] in lines[first["line_no"] - 1]


def test_the_shared_fixtures_diagnose_with_the_cli_document_shape():
    for sample in sorted(SHARED.glob("*.txt")):
        found = diagnose_paths([str(sample)], tables={})
        assert set(found) >= {"root_cause", "findings"}
        if found["root_cause"] is not None:
            assert set(found["root_cause"]) >= {"codes", "category", "line", "fix", "blame"}


def test_wrappers_are_told_apart_from_root_codes():
    book = load_rules()
    for code in ("EZ9999", "EE9999", "E39999", "EH9999", "ERR00100", "ERR01100"):
        assert book.for_code(code).role == "wrapper", code
    for code in ("EZ3002", "EI0006", "E40021", "EL0001", "507035"):
        assert book.for_code(code).role == "root", code


def test_every_rule_has_a_source_a_fix_and_a_category_of_the_vocabulary():
    from workers.contract.diagnosis import BLAMES, CATEGORIES

    for rule in load_rules().rules:
        assert rule.source, rule.id
        assert rule.fix, rule.id
        assert rule.meaning, rule.id
        assert rule.category in CATEGORIES
        assert rule.blame in BLAMES


# Rules no public log in the corpus shows yet (docs/diagnosis.md, "Not yet"): a family's
# catch-all, or a message whose real text is still to be found. The list only shrinks.
WITHOUT_A_PUBLIC_SAMPLE = {
    "drv-ecc",
    "hccl-link-down",
    "hccl-rank-mismatch",
    "torch_npu-backend-failed",
    "version-mismatch",
    "device-busy",
    "memory-out-of-range",
    "overflow",
    "killed-oom-host",
    "cann-EI-family",
    "cann-EL0004",
    "cann-EH-family",
    "cann-E1-family",
    "cann-E-unknown",
    "acl-107019",
    "acl-107-param",
    "acl-207001",
    "acl-207000",
    "acl-207-resource",
    "acl-507042",
    "acl-507901",
    "acl-507-generic",
    "torch_npu-not-support",
    "torch_npu-memory",
    "torch_npu-dist-timeout",
    "ms-framework-exception",
}


def test_every_other_rule_matches_real_text_in_the_corpus():
    matched = set()
    for path in [*CORPUS.glob("*.log"), *CORPUS.parent.glob("*.log"), *CAPTURED.glob("*.log")]:
        scanner = Scanner(tables={})
        scanner.scan_path(str(path))
        matched |= {hit.rule.id for hit in scanner.hits}
    every = {rule.id for rule in load_rules().rules}
    assert every - matched == WITHOUT_A_PUBLIC_SAMPLE
