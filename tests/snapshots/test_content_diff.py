from __future__ import annotations

import pytest

from npulab.snapshots.content import SnapshotInvalid, content_hash, split, summarize, validate
from npulab.snapshots.diff import change_line, diff


def test_readings_do_not_change_the_identity(document) -> None:
    a, b = document(), document()
    b["collected_at"] += 3600
    b["collector"]["seconds"] = 9.9
    b["npu"]["chips"][0]["temp_c"] = 81.0
    b["npu"]["chips"][0]["hbm_used_mb"] = 60000
    b["npu"]["processes"] = []
    stable_a, telemetry_a = split(a)
    stable_b, telemetry_b = split(b)
    assert content_hash(stable_a) == content_hash(stable_b)
    assert telemetry_b["chips"][0]["temp_c"] == 81.0
    assert "temp_c" not in stable_b["npu"]["chips"][0]
    assert telemetry_a["processes"]  # fixture 01 has a process on NPU 2
    assert a["npu"]["chips"][0]["temp_c"] != 81.0  # split leaves its input alone


def test_what_is_installed_changes_the_identity(document) -> None:
    assert content_hash(split(document())[0]) != content_hash(
        split(document(packages={"numpy": "2.0.0"}))[0]
    )


def test_summary_names_the_versions_people_look_for(document) -> None:
    summary = summarize(split(document(torch="2.5.1", torch_npu="2.5.1"))[0])
    assert summary["driver"] == "25.0.rc1.1"
    assert summary["firmware"] == "7.7.0.1.231"
    assert summary["cann"] == "8.1.RC1"
    assert summary["npu_smi"] == "25.2.0"
    assert summary["chips"] == "8 × 910B3"
    assert (summary["torch"], summary["torch_npu"]) == ("2.5.1", "2.5.1")
    assert summary["packages"] > 10


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        ([], "must be a JSON object"),
        ({"schema": 2}, "schema must be 1, got 2"),
        ({"schema": 1, "host": {}}, "missing section(s): npu, ascend, python, env, cuda, findings"),
    ],
)
def test_documents_that_are_not_snapshots_are_refused(broken: object, message: str) -> None:
    with pytest.raises(SnapshotInvalid, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate(broken)


def test_a_section_of_the_wrong_type_is_refused(document) -> None:
    doc = document()
    doc["python"] = ["not", "an", "object"]
    with pytest.raises(SnapshotInvalid, match="section\\(s\\) must be objects: python"):
        validate(doc)


def test_diff_of_a_cann_and_torch_npu_upgrade(document) -> None:
    # The collected environment is this machine's: name packages it cannot have.
    before = split(document(torch_npu="2.1.0.post8", packages={"old-pkg": "4.0", "new-pkg": None}))[
        0
    ]
    after_doc = document(
        cann="8.1.RC1", torch_npu="2.5.1", packages={"old-pkg": None, "new-pkg": "13.0"}
    )
    before["ascend"]["cann"]["installs"][0]["version"] = "8.0.RC3"
    before["ascend"]["cann"]["links"][0]["target"] = "8.0.RC3"
    after = split(after_doc)[0]
    changes = diff(before, after)
    assert changes["identical"] is False
    assert {c["name"]: (c["from"], c["to"]) for c in changes["versions"]} == {
        "CANN": ("8.0.RC3", "8.1.RC1"),
        "torch_npu": ("2.1.0.post8", "2.5.1"),
    }
    assert changes["packages"]["added"] == {"new-pkg": "13.0"}
    assert changes["packages"]["removed"] == {"old-pkg": "4.0"}
    assert changes["packages"]["changed"] == {"torch-npu": ["2.1.0.post8", "2.5.1"]}
    assert change_line(changes) == (
        "CANN 8.0.RC3 → 8.1.RC1, torch_npu 2.1.0.post8 → 2.5.1, +1 −1 ~1 packages"
    )


def test_identical_snapshots_have_an_empty_diff(document) -> None:
    stable = split(document())[0]
    changes = diff(stable, stable)
    assert changes["identical"] is True
    assert change_line(changes) == "no change"
    assert changes["packages"]["unchanged"] == len(stable["python"]["packages"])


def test_devices_env_and_findings_are_compared(document) -> None:
    a, b = document(), document()
    b["npu"]["chips"][1]["health"] = "Warning"
    b["env"]["vars"]["HCCL_CONNECT_TIMEOUT"] = "1200"
    b["findings"].append(
        {"id": "chip-health", "severity": "warning", "title": "1 chip(s) not healthy"}
    )
    changes = diff(split(a)[0], split(b)[0])
    assert changes["devices"]["changed"] == [
        {"device": "npu 1 chip 0", "field": "health", "from": "OK", "to": "Warning"}
    ]
    assert changes["env"]["added"] == {"HCCL_CONNECT_TIMEOUT": "1200"}
    assert [f["id"] for f in changes["findings"]["appeared"]] == ["chip-health"]
    assert change_line(changes) == ("1 env variable, 1 new finding(s), devices changed")
