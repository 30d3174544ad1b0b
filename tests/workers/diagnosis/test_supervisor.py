"""The supervisor's diagnosis of real runs by hand (``python -m workers.run``)."""

from __future__ import annotations

import tarfile
from pathlib import Path

from tests.workers.test_run_cli import by_type, run

# A real torch_npu OOM line (tests/fixtures/diagnosis/corpus/oom-old-format-vllm-ascend.log).
OOM = (
    "RuntimeError: NPU out of memory. Tried to allocate 22.00 MiB (NPU 0; 60.97 GiB total "
    "capacity; 10.24 GiB already allocated; 10.24 GiB current active; 19.52 MiB free; "
    "10.65 GiB reserved in total by PyTorch)"
)


def _script(run_dir: Path, name: str, body: str) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / name).write_text(body)


def test_a_failed_run_ends_with_its_diagnosis_and_its_plogs_land_in_the_run(tmp_path: Path):
    run_dir = tmp_path / "r"
    _script(
        run_dir,
        "oom.py",
        "import os, sys\n"
        "plogs = os.environ['ASCEND_PROCESS_LOG_PATH']\n"
        "os.makedirs(os.path.join(plogs, 'debug', 'plog'), exist_ok=True)\n"
        "with open(os.path.join(plogs, 'debug', 'plog', 'plog-1.log'), 'w') as f:\n"
        "    f.write('[ERROR] RUNTIME(1,python):2025-01-01-00:00:00.000.000 malloc failed\\n')\n"
        f"print({OOM!r}, file=sys.stderr)\n"
        "sys.exit(1)\n",
    )
    code, stderr, events = run(
        {"kind": "training", "device_type": "cpu", "entry": "oom.py"}, run_dir
    )
    assert code == 1, stderr
    assert [event["type"] for event in events[-2:]] == ["diagnosis", "result"]
    diagnosis = events[-2]["diagnosis"]
    assert diagnosis["category"] == "oom"
    assert diagnosis["blame"] == "user-code"
    assert diagnosis["evidence"][0]["file"] == "stderr"
    assert (run_dir / "ascend_log" / "debug" / "plog" / "plog-1.log").exists()
    # The collected files and plogs travel to the platform as one artifact.
    (artifact,) = by_type(events, "artifact")
    assert artifact["name"] == "diagnosis.tar.gz"
    assert artifact["kind"] == "report"
    with tarfile.open(artifact["path"]) as archive:
        assert "ascend_log/debug/plog/plog-1.log" in archive.getnames()


def test_a_hung_run_is_stopped_with_its_stacks_and_diagnosed_hang(tmp_path: Path):
    run_dir = tmp_path / "r"
    _script(run_dir, "hang.py", "import time\nprint('started', flush=True)\ntime.sleep(600)\n")
    code, stderr, events = run(
        {"kind": "training", "device_type": "cpu", "entry": "hang.py", "hang_timeout_s": 2},
        run_dir,
    )
    assert code == 1, stderr
    result = events[-1]
    assert result["cause"] == "hang"
    assert events[-2]["diagnosis"]["category"] == "hang"
    # Silent and idle: the sleeping process spent no CPU time.
    assert "its devices idle (" in events[-2]["diagnosis"]["line"]
    assert (run_dir / "diagnosis" / "stacks.txt").exists()


def test_a_silent_run_whose_device_computes_is_not_a_hang(tmp_path: Path):
    # A long compile or an evaluation that logs nothing: no event for longer than
    # hang_timeout_s, but the run's own processes keep the CPU busy.
    run_dir = tmp_path / "r"
    _script(
        run_dir,
        "busy.py",
        "import time\nprint('started', flush=True)\nbegun, n = time.monotonic(), 0\n"
        "while time.monotonic() - begun < 7:\n    n += 1\nprint('done', n > 0)\n",
    )
    code, stderr, events = run(
        {"kind": "training", "device_type": "cpu", "entry": "busy.py", "hang_timeout_s": 2},
        run_dir,
    )
    assert code == 0, stderr
    assert events[-1]["status"] == "succeeded"
    lines = [event["line"] for event in by_type(events, "log")]
    assert "done True" in lines
    assert any(line.endswith("utilisation): not a hang") for line in lines), lines


def test_stop_on_nan_ends_the_run_at_the_first_nan_loss(tmp_path: Path):
    run_dir = tmp_path / "r"
    _script(
        run_dir,
        "nan.py",
        "import time\nfrom workers import track\nrun = track.init()\n"
        "for step in range(1000):\n"
        "    run.log(step, loss=float('nan') if step == 5 else 1.0)\n"
        "    time.sleep(0.05)\n",
    )
    code, stderr, events = run(
        {"kind": "training", "device_type": "cpu", "entry": "nan.py", "stop_on_nan": True},
        run_dir,
    )
    assert code == 1, stderr
    assert events[-1]["cause"] == "nan_loss"
    findings = events[-2]["findings"]
    assert findings[0]["name"] == "nan-loss"
    assert findings[0]["step"] == 5
    assert by_type(events, "metric")
