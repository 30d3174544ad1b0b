"""The knowledge base: rules read from the JSON files in ``rules/`` (docs/diagnosis.md).

A rule matches a code (exactly, or by a pattern over the code) or a regular
expression over a line, and says what it means: its category and blame (the
contract's vocabulary), its role in ranking, the fix and the public source it
came from. Codes are taken from a line by the extractors below, so one line
gives each of its codes once, whatever rule explains it.
"""

from __future__ import annotations

import json
import os
import re
from typing import Iterator

from workers.contract.diagnosis import BLAMES, CATEGORIES

RULES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rules")
# Files are read in this order; within a code family the first rule that fits wins,
# so specific codes come before the family's catch-all.
RULE_FILES = ("driver", "hccl", "text", "mindspore", "cann", "acl", "torch_npu", "python")

# Roles, in the order ranking prefers them (hardware aside, docs/diagnosis.md).
ROOT, GENERIC, USER, WRAPPER = "root", "generic", "user", "wrapper"
ROLES = (ROOT, GENERIC, USER, WRAPPER)

# Codes as Ascend prints them. A CANN code is E + a letter or digit + 4 digits, not part
# of a longer word or number; an ACL code is 6 digits after the words that introduce it
# (MindSpore's task-failure lines say ``retcode: 507011``).
CANN_CODE = re.compile(r"(?<![A-Za-z0-9_])(E[A-Z0-9]\d{4})(?![0-9])")
ACL_CODE = re.compile(
    r"(?:error code is|runtime result =|result =|ret:|ret=|failed: |ErrCode=|return: "
    r"|NPU error code is:|retcode:)\s*(\d{6})(?![0-9])"
)
TORCH_NPU_CODE = re.compile(r"(?<![A-Za-z0-9])(ERR\d{5})(?![0-9])")
EXTRACTORS = (CANN_CODE, ACL_CODE, TORCH_NPU_CODE)


class RuleError(ValueError):
    """A rule file that cannot be used: the message names the file and the rule."""


class Rule:
    """One entry of the knowledge base."""

    __slots__ = (
        "blame",
        "category",
        "code",
        "code_group",
        "codes",
        "fix",
        "id",
        "meaning",
        "python_exception",
        "regex",
        "role",
        "source",
    )

    def __init__(self, data: dict, where: str) -> None:
        try:
            self.id = str(data["id"])
            match = data["match"]
            self.role = data["role"]
            self.category = data["category"]
            self.blame = data["blame"]
            self.meaning = str(data["meaning"])
            self.fix = str(data["fix"])
            self.source = str(data["source"])
        except KeyError as exc:
            raise RuleError(f"{where}: rule {data.get('id')!r} lacks {exc}") from None
        if self.role not in ROLES:
            raise RuleError(f"{where}: rule {self.id}: role {self.role!r} not in {ROLES}")
        if self.category not in CATEGORIES:
            raise RuleError(f"{where}: rule {self.id}: unknown category {self.category!r}")
        if self.blame not in BLAMES:
            raise RuleError(f"{where}: rule {self.id}: unknown blame {self.blame!r}")
        self.code: str | None = data.get("code")
        exact = match.get("code")
        pattern = match.get("codes")
        self.codes = re.compile(pattern) if pattern else None
        if exact:
            self.codes = re.compile(re.escape(exact))
        self.regex = re.compile(match["regex"]) if match.get("regex") else None
        self.code_group = int(match.get("code_group", 0))
        self.python_exception = match.get("python_exception")
        if self.codes is None and self.regex is None and self.python_exception is None:
            raise RuleError(
                f"{where}: rule {self.id}: match needs code, codes, regex or python_exception"
            )

    def describe(self) -> dict:
        return {
            "id": self.id,
            "role": self.role,
            "category": self.category,
            "blame": self.blame,
            "meaning": self.meaning,
            "fix": self.fix,
            "source": self.source,
        }


class RuleBook:
    """Every rule, indexed for the scanner."""

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules
        self.by_id = {rule.id: rule for rule in rules}
        if len(self.by_id) != len(rules):
            raise RuleError("two rules share an id")
        self.code_rules = [rule for rule in rules if rule.codes is not None]
        self.regex_rules = [rule for rule in rules if rule.regex is not None]
        self.user_exception = next(
            (rule for rule in rules if rule.python_exception == "user"), None
        )
        self._code_cache: dict[str, Rule | None] = {}

    def for_code(self, code: str) -> Rule | None:
        """The first rule whose code pattern fits ``code`` whole."""
        if code not in self._code_cache:
            found = next((rule for rule in self.code_rules if rule.codes.fullmatch(code)), None)
            if len(self._code_cache) < 10000:
                self._code_cache[code] = found
            return found
        return self._code_cache[code]

    def text_matches(self, line: str) -> Iterator[tuple[Rule, str | None]]:
        """Each regex rule that matches ``line``, with the code its match names (or None)."""
        for rule in self.regex_rules:
            match = rule.regex.search(line)
            if match is not None:
                code = None
                if rule.code_group:
                    code = next((g for g in match.groups() if g), None)
                yield rule, code


def codes_in(line: str) -> list[str]:
    """The Ascend codes printed in ``line``, each once, in the order they appear."""
    found: list[tuple[int, str]] = []
    for extractor in EXTRACTORS:
        for match in extractor.finditer(line):
            found.append((match.start(1), match.group(1)))
    seen = set()
    ordered = []
    for _, code in sorted(found):
        if code not in seen:
            seen.add(code)
            ordered.append(code)
    return ordered


def load_rules(directory: str = RULES_DIR) -> RuleBook:
    """Read every rule file; a bad file raises ``RuleError`` naming it."""
    rules: list[Rule] = []
    for name in RULE_FILES:
        path = os.path.join(directory, name + ".json")
        try:
            with open(path, encoding="utf-8") as handle:
                doc = json.load(handle)
        except (OSError, ValueError) as exc:
            raise RuleError(f"{path}: {exc}") from None
        for index, data in enumerate(doc.get("rules", [])):
            try:
                rules.append(Rule(data, f"{name}.json#{index}"))
            except re.error as exc:
                raise RuleError(f"{name}.json#{index}: bad pattern: {exc}") from None
    return RuleBook(rules)


_default: RuleBook | None = None


def default_rules() -> RuleBook:
    """The shipped rules, read once."""
    global _default
    if _default is None:
        _default = load_rules()
    return _default
