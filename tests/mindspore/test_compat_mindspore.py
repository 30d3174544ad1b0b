"""MindSpore ↔ CANN ↔ Python verdicts from data/compat-mindspore.csv, and on the snapshot page."""

from __future__ import annotations

from workers.contract.compat_mindspore import check_mindspore_stack, load_table


def test_every_row_names_its_source() -> None:
    assert all(row["source"] for row in load_table())


def test_a_release_with_its_cann_and_python_in_range_is_ok() -> None:
    verdict = check_mindspore_stack("2.7.1", "8.3.RC1", "3.11.4")
    assert verdict["checks"] == [
        {"verdict": "ok", "reason": "MindSpore 2.7.1 is released for CANN 8.3.RC1"},
        {"verdict": "ok", "reason": "Python 3.11 is within 3.9 to 3.11 for MindSpore 2.7.1"},
    ]
    assert verdict["verdict"] == "ok"
    assert verdict["sources"]


def test_a_release_without_a_published_python_range_is_unknown_on_python() -> None:
    verdict = check_mindspore_stack("2.4.10", "8.0.0", "3.10.14")
    assert verdict["checks"] == [
        {"verdict": "ok", "reason": "MindSpore 2.4.10 is released for CANN 8.0.0"},
        {"verdict": "unknown", "reason": "no Python range is published for MindSpore 2.4.10"},
    ]
    assert verdict["verdict"] == "unknown"


def test_a_release_published_for_several_canns_is_ok_with_any_and_names_them() -> None:
    for cann in ("8.0.RC1", "8.0.RC2"):
        assert check_mindspore_stack("2.3.0", cann, None)["checks"][0]["verdict"] == "ok"
    verdict = check_mindspore_stack("2.3.0", "8.0.RC3", None)
    assert verdict["reasons"][0] == (
        "MindSpore 2.3.0 is released for CANN 8.0.RC2, 8.0.RC2.beta1, 8.0.RC1, not 8.0.RC3"
    )
    assert len(verdict["sources"]) == 3


def test_a_release_without_a_cann_pairing_is_unknown_on_cann() -> None:
    verdict = check_mindspore_stack("2.8.0", "8.5.0", "3.12.1")
    assert verdict["checks"] == [
        {"verdict": "unknown", "reason": "no CANN pairing is published for MindSpore 2.8.0"},
        {"verdict": "ok", "reason": "Python 3.12 is within 3.9 to 3.12 for MindSpore 2.8.0"},
    ]


def test_another_cann_is_incompatible() -> None:
    verdict = check_mindspore_stack("2.6.0rc1", "8.3.RC1", "3.11")
    assert verdict["verdict"] == "incompatible"
    assert verdict["reasons"][0] == "MindSpore 2.6.0rc1 is released for CANN 8.1.RC1, not 8.3.RC1"


def test_on_a_cpu_host_only_python_is_checked() -> None:
    assert check_mindspore_stack("2.10.0", None, "3.11.7")["checks"] == [
        {"verdict": "ok", "reason": "Python 3.11 is within 3.9 to 3.12 for MindSpore 2.10.0"}
    ]
    verdict = check_mindspore_stack("2.10.0", None, "3.13.1")
    assert verdict["verdict"] == "incompatible"


def test_a_release_not_in_the_table_is_unknown() -> None:
    verdict = check_mindspore_stack("1.0.0", "8.0.0", "3.9")
    assert verdict["reasons"] == ["MindSpore 1.0.0 is not in the table"]
    assert verdict["verdict"] == "unknown"


def test_a_snapshot_with_mindspore_shows_its_verdict_and_evidence(
    api, client, owner, cpu_host, document
) -> None:
    from npulab.snapshots.services import do_record_snapshot

    # The collected snapshot has CANN 8.1.RC1: MindSpore 2.6.0rc1's.
    snapshot = do_record_snapshot(cpu_host, document(mindspore="2.6.0rc1")).snapshot
    detail = api.get(f"/api/v1/snapshots/{snapshot.pk}/").json()
    checks = detail["compatibility"]["mindspore_stack"]["checks"]
    assert checks[0] == {
        "verdict": "ok",
        "reason": "MindSpore 2.6.0rc1 is released for CANN 8.1.RC1",
    }
    client.force_login(owner)
    page = client.get(snapshot.get_absolute_url()).content.decode()
    assert "MindSpore / CANN / Python" in page
    assert "MindSpore 2.6.0rc1 is released for CANN 8.1.RC1" in page
