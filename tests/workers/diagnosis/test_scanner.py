"""Ranking and reading: multi-rank logs, user code, bad input, CANN tables, findings."""

from __future__ import annotations

import json
import os
from pathlib import Path

from workers.collect.snapshot import collect_ascend
from workers.contract.diagnosis import ERROR_TABLES
from workers.contract.script_env import CANN_ERROR_TABLES
from workers.diagnosis import diagnose_paths
from workers.diagnosis.cann_tables import find_tables, installed_tables, load_tables
from workers.diagnosis.collect import bound_directory
from workers.diagnosis.findings import HealthWatch
from workers.diagnosis.ranking import diagnose
from workers.diagnosis.scanner import Scanner, scan_text

# Rank 1's real failure (vllm-ascend#19) interleaved with ranks 0 and 2 that only waited
# for it in a collective (vllm-ascend#486).
MULTI_RANK = (
    Path(__file__).resolve().parents[2] / "fixtures" / "diagnosis" / "multi-rank.log"
).read_text(encoding="utf-8")


def test_the_first_failing_rank_is_named_and_the_ranks_that_only_waited():
    found = diagnose(scan_text(MULTI_RANK).hits)
    assert found["category"] == "oom"
    assert found["ranks"] == {"first_failed": 1, "failed": [1], "timed_out": [0, 2]}
    assert found["evidence"][0]["line_no"] == 3


def test_an_uncaught_exception_in_the_users_file_is_user_code(tmp_path):
    log = (
        "Traceback (most recent call last):\n"
        '  File "/home/me/train.py", line 12, in <module>\n'
        "    main()\n"
        '  File "/home/me/train.py", line 9, in main\n'
        "    raise ValueError('bad config')\n"
        "ValueError: bad config\n"
    )
    found = diagnose(scan_text(log).hits)
    assert found["category"] == "user-code"
    assert found["blame"] == "user-code"
    assert "/home/me/train.py:9" in found["line"]
    assert found["evidence"][0]["line_no"] == 6


def test_an_exception_raised_inside_a_library_is_not_blamed_on_the_user():
    log = (
        "Traceback (most recent call last):\n"
        '  File "/home/me/train.py", line 12, in <module>\n'
        '  File "/usr/lib/python3.10/site-packages/lib/x.py", line 3, in f\n'
        "KeyError: 'x'\n"
    )
    assert diagnose(scan_text(log).hits) is None


def test_a_hardware_fault_outranks_an_earlier_root_code():
    log = (
        "[PID: 1] 2026-01-01-00:00:00.000.000 Unsupported_Operator(EZ3002): Optype [X] "
        "is unsupported.\n"
        "        Device[0] lost heartbeat.[FUNC:SyncTask][FILE:direct_hwts_engine.cc][LINE:407]\n"
    )
    found = diagnose(scan_text(log).hits)
    assert found["category"] == "hardware-fault"
    assert found["blame"] == "host-hardware"
    assert found["codes"][0] == "507010"


def test_binary_crlf_ansi_and_endless_lines_are_read_without_trouble(tmp_path):
    path = tmp_path / "mixed.log"
    with open(path, "wb") as handle:
        handle.write(os.urandom(200_000))
        handle.write(
            b"\n\x1b[31mRuntimeError: NPU out of memory. Tried to allocate 2 MiB\x1b[0m\r\n"
        )
        handle.write("日本語 \xff\xfe latin-1 bytes\n".encode("latin-1", errors="replace"))
        handle.write(b"x" * 3_000_000 + b"\n")  # one line longer than a chunk's line limit
        handle.write(
            b"[ERROR] 2025-01-01 (PID:1, Device:0, RankID:-1) ERR01100 OPS call acl api failed\r\n"
        )
    found = diagnose_paths([str(path)], tables={})
    assert found["root_cause"]["category"] == "oom"
    assert found["evidence"][0]["text"].startswith("RuntimeError: NPU out of memory")
    assert "\x1b" not in found["evidence"][0]["text"]


def test_line_numbers_hold_across_chunks(tmp_path, monkeypatch):
    from workers.diagnosis import scanner

    monkeypatch.setattr(scanner, "CHUNK_BYTES", 1000)
    path = tmp_path / "long.log"
    lines = [f"step {i} fine" for i in range(5000)]
    lines[4321] = (
        "EI0006: Getting socket times out. Reason: Remote Rank did not send the data in time."
    )
    path.write_text("\n".join(lines) + "\n")
    found = diagnose_paths([str(path)], tables={})
    assert found["evidence"][0]["line_no"] == 4322


def test_a_plog_is_read_for_its_error_lines(tmp_path):
    plog = tmp_path / "debug" / "plog" / "plog-1234_2025.log"
    plog.parent.mkdir(parents=True)
    plog.write_text(
        "[INFO] RUNTIME(1234,python):2025-07-23-03:47:57.070.463 [runtime.cc:1] 1 start\n"
        * 100
        + "[ERROR] HCCL(2717288,python3):2025-07-23-03:47:57.070.463 [hccl_socket.cc:100] "
        "[2717288][HcclSocket][Listen] socket type[1], listen on ip[192.168.20.160] and specific "
        "port[16666] fail. Please check the port status.\n"
    )
    found = diagnose_paths([str(tmp_path)], tables={})
    assert found["root_cause"]["category"] == "hccl-init"
    assert found["evidence"][0]["line_no"] == 101


def test_a_run_log_that_starts_with_torch_npus_error_line_is_read_whole():
    # torch_npu's "[ERROR] <date> (PID:...) ERRxxxxx" looks like a plog's first line, but
    # the lines after it hold the cause and no "[ERROR]" (vllm-ascend#10834).
    log = (
        "[ERROR] 2026-06-12-08:41:39 (PID:379, Device:0, RankID:-1) ERR00100 PTA call acl "
        "api failed.\n"
        "(EngineCore pid=379) [PID: 379] 2026-06-12-08:41:39.800.815 "
        "AclNN_Parameter_Error(EZ1001): antiquantGroupSize should be 128 or 64, but actual "
        "antiquantGroupSize is [256].\n"
    )
    found = diagnose(scan_text(log, "run.log").hits)
    assert found is not None
    assert (found["root_code"], found["category"]) == ("EZ1001", "op-unsupported")


def test_a_support_bundle_is_read_member_by_member(tmp_path):
    import tarfile

    log = tmp_path / "run.log"
    log.write_text("E40021: Failed to compile Op [trans_Cast_2,].\n")
    bundle = tmp_path / "bundle.tar.gz"
    with tarfile.open(bundle, "w:gz") as archive:
        archive.add(log, arcname="logs/run.log")
    found = diagnose_paths([str(bundle)], tables={})
    assert found["root_cause"]["codes"][0] == "E40021"
    assert found["evidence"][0]["file"].endswith("bundle.tar.gz:logs/run.log")


def _toolkit_table(conf: Path) -> Path:
    """A toolkit's error manager table with one code no shipped rule knows."""
    conf.mkdir(parents=True)
    table = conf / "error_code.json"
    table.write_text(
        json.dumps(
            {
                "error_info_list": [
                    {
                        "errClass": "Test Errors",
                        "errTitle": "Some_Title",
                        "ErrCode": "EQ1234",
                        "ErrMessage": "Something %s failed",
                        "suggestion": {"Possible Cause": "N/A", "Solution": "Do the thing."},
                    }
                ]
            }
        )
    )
    return table


def test_the_installations_own_tables_name_a_code_no_rule_knows(tmp_path):
    _toolkit_table(tmp_path / "latest" / "conf" / "error_manager")
    paths = find_tables([str(tmp_path / "latest")])
    tables = load_tables(paths)
    scanner = Scanner(tables=tables)
    scan_text("EQ1234: Something x failed\n", scanner=scanner)
    found = diagnose(scanner.hits)
    assert found["rule"] == "cann-table-EQ1234"
    assert found["fix"] == "Do the thing."
    assert "Some_Title" in found["meaning"]


def test_the_snapshot_finds_the_tables_and_the_run_reads_those(tmp_path):
    # Found when the host takes its environment snapshot ...
    table = _toolkit_table(
        tmp_path / "Ascend" / "ascend-toolkit" / "latest" / "conf" / "error_manager"
    )
    ascend = collect_ascend(str(tmp_path / "Ascend"), str(tmp_path / "etc"))
    assert ascend[ERROR_TABLES] == [str(table.resolve())]
    # ... handed to the run's supervisor, which reads those and looks for no others.
    listed = {CANN_ERROR_TABLES: os.pathsep.join(ascend[ERROR_TABLES])}
    assert set(installed_tables(listed)) == {"EQ1234"}
    assert (
        installed_tables({CANN_ERROR_TABLES: "", "ASCEND_TOOLKIT_HOME": str(table.parents[2])})
        == {}
    )
    # A run by hand looks for them itself.
    assert set(installed_tables({"ASCEND_TOOLKIT_HOME": str(table.parents[2])})) == {"EQ1234"}


def test_live_lines_are_diagnosed_as_they_come():
    scanner = Scanner(tables={})
    for number, line in enumerate(MULTI_RANK.splitlines(), 1):
        scanner.feed(line, "stderr", number)
    assert diagnose(scanner.hits)["category"] == "oom"


def test_training_health_findings():
    watch = HealthWatch()
    for step in range(20):
        watch.metric("train/loss", step, 1.0)
    assert watch.metric("train/loss", 20, 50.0)["name"] == "loss-spike"
    for step in range(3):
        watch.metric("loss_scale", step, 1.0)
    for step in range(3):
        watch.metric("grad_norm", step, 0.0)
    assert watch.metric("train/loss", 21, None, "nan")["name"] == "nan-loss"
    assert [f["name"] for f in watch.findings] == [
        "loss-spike",
        "loss-scale-floor",
        "grad-norm-zero",
        "nan-loss",
    ]
    assert watch.first_nan["step"] == 21


def test_collected_logs_are_bounded_newest_kept(tmp_path):
    for index in range(5):
        path = tmp_path / f"plog-{index}.log"
        path.write_bytes(b"x" * 1000)
        os.utime(path, (1000 + index, 1000 + index))
    removed = bound_directory(str(tmp_path), limit=2500)
    assert sorted(os.path.basename(p) for p in removed) == [
        "plog-0.log",
        "plog-1.log",
        "plog-2.log",
    ]


def test_a_huge_plain_log_is_read_at_its_head_and_tail_with_true_line_numbers(
    tmp_path, monkeypatch
):
    from workers.diagnosis import scanner

    monkeypatch.setattr(scanner, "CHUNK_BYTES", 10_000)
    monkeypatch.setattr(scanner, "PLAIN_LIMIT", 200_000)
    monkeypatch.setattr(scanner, "PLAIN_HEAD", 50_000)
    lines = [f"step {i} fine" for i in range(100_000)]
    lines[50_000] = "EI0006: Getting socket times out."  # in the middle: only counted
    lines[99_990] = "RuntimeError: NPU out of memory. Tried to allocate 2 MiB"
    path = tmp_path / "huge.log"
    path.write_text("\n".join(lines) + "\n")
    found = diagnose_paths([str(path)], tables={})
    assert found["root_cause"]["category"] == "oom"
    assert found["evidence"][0]["line_no"] == 99_991
    assert all(item["line_no"] != 50_001 for item in found["evidence"])
