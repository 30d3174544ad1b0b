"""From the hits of a scan to one root cause (docs/diagnosis.md, "Ranking").

A hardware or driver fault comes first; then, in a multi-rank log, the failure
of the first rank that failed (the others only timed out waiting for it); then
the earliest root code; then generic codes (a return code that says only "it
failed"); then an uncaught exception in the user's own file; then wrappers such
as EZ9999 and EE9999, which only say that something below them failed.
"""

from __future__ import annotations

from typing import Sequence

from workers.contract.diagnosis import HOST_HARDWARE
from workers.diagnosis.rules import GENERIC, ROOT, USER, WRAPPER
from workers.diagnosis.scanner import Hit

_ROLE_ORDER = {ROOT: 0, GENERIC: 1, USER: 2, WRAPPER: 3}
# A rank whose best hit is one of these only waited for another.
WAITING = ("hccl-timeout", "hang")
# Lines after a code-less root line where its code is usually printed (torch_npu's
# ``[ERROR] ... ERRxxxxx`` suffix, a runtime result).
_BORROW_LINES = 3
MAX_EVIDENCE = 8
MAX_CODES = 10


def _key(hit: Hit) -> tuple[int, int, int, int]:
    hardware = 0 if hit.rule.blame == HOST_HARDWARE and hit.rule.role == ROOT else 1
    specificity = 0 if hit.rule.regex is not None else 1
    return (hardware, _ROLE_ORDER[hit.rule.role], hit.seq, specificity)


def best(hits: Sequence[Hit]) -> Hit | None:
    return min(hits, key=_key) if hits else None


def _ranks(hits: Sequence[Hit]) -> tuple[Sequence[Hit], dict | None]:
    """The hits of the first failing rank, and who failed and who waited (None: one rank)."""
    by_rank: dict[int, list[Hit]] = {}
    for hit in hits:
        if hit.rank is not None:
            by_rank.setdefault(hit.rank, []).append(hit)
    if len(by_rank) < 2:
        return hits, None
    best_of = {rank: best(found) for rank, found in by_rank.items()}
    waited = sorted(rank for rank, hit in best_of.items() if hit.rule.category in WAITING)
    failed = sorted(rank for rank in by_rank if rank not in waited)
    if not failed:
        return hits, {"first_failed": None, "failed": [], "timed_out": waited}
    first = min(failed, key=lambda rank: min(hit.seq for hit in by_rank[rank]))
    # Lines that name no rank (a plog, a driver message) still count beside its own.
    pool = [hit for hit in hits if hit.rank in (first, None)]
    return pool, {"first_failed": first, "failed": failed, "timed_out": waited}


def _root_code(root: Hit, hits: Sequence[Hit]) -> str | None:
    """The root line's code, else the nearest code after it, else before it (same block)."""
    if root.code:
        return root.code
    near = [
        hit
        for hit in hits
        if hit.file == root.file
        # torch_npu's suffix line names its rank where the message did not.
        and (hit.rank == root.rank or None in (hit.rank, root.rank))
        and hit.code
        and hit.rule.role != WRAPPER
        and 0 < abs(hit.line_no - root.line_no) <= _BORROW_LINES
    ]
    near.sort(key=lambda hit: (hit.line_no < root.line_no, abs(hit.line_no - root.line_no)))
    return near[0].code if near else None


def diagnose(hits: Sequence[Hit], findings: Sequence[dict] = ()) -> dict | None:
    """The diagnosis of a scan, in the shape of the run API's ``diagnosis``; None if no hit."""
    if not hits:
        return None
    pool, ranks = _ranks(hits)
    root = best(pool)
    if root is None:
        return None
    code = _root_code(root, hits)
    ordered = sorted(pool, key=_key)
    codes: list[str] = [code] if code else []
    for hit in ordered:
        for found in [hit.code, *hit.codes]:
            if found and found not in codes and len(codes) < MAX_CODES:
                codes.append(found)
    evidence = [root.evidence()]
    seen = {(root.file, root.line_no)}
    for hit in ordered:
        where = (hit.file, hit.line_no)
        if where not in seen and len(evidence) < MAX_EVIDENCE:
            seen.add(where)
            evidence.append(hit.evidence())
    rule = root.rule
    line = root.text
    if root.frame is not None:
        # What a user needs first is where in their own file it was raised.
        line = f"{line} (raised at {root.frame[0]}:{root.frame[1]})"
    return {
        "category": rule.category,
        "codes": codes,
        # The root cause's own code (codes[0] then), or None when its line has none.
        "root_code": code,
        "line": line,
        "fix": rule.fix,
        "blame": rule.blame,
        "rule": rule.id,
        "meaning": rule.meaning,
        "source": rule.source,
        "evidence": evidence,
        "ranks": ranks,
        "findings": list(findings),
    }


def root_cause(diagnosis: dict | None) -> dict | None:
    """The offline CLI's ``root_cause``: codes, category, line, fix, blame."""
    if diagnosis is None:
        return None
    return {key: diagnosis[key] for key in ("codes", "category", "line", "fix", "blame", "rule")}
