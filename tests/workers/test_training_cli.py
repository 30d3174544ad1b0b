"""Training runs executed by hand: ``python -m workers.run`` with a training spec."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.paths import REPO_DIR
from tests.workers.test_run_cli import by_type, run
from workers.events import iter_events
from workers.processes import kill_registered


def training(**fields) -> dict:
    return {"kind": "training", "device_type": "cpu", **fields}


def losses(events: list[dict]) -> list[float]:
    return [e["value"] for e in by_type(events, "metric") if e["key"] == "loss"]


class Trained:
    """A finished run: its directory, and its events as they were when it ended."""

    def __init__(self, run_dir: Path, events: list[dict]) -> None:
        self.run_dir = run_dir
        self.events = events

    def copy(self, to: Path) -> Path:
        """The run's directory as the run left it, for a test to run in again."""
        shutil.copytree(self.run_dir, to)
        return to


# The CNN with a checkpoint every 20 steps. The tests that need a finished run of it (that
# it learns, the reference of a killed run, a restart after the last checkpoint or from a
# damaged one) share one, each a copy of its directory: every run costs seconds of CPU
# (torch's and its optimizer's imports) before its first step.
CNN = training(entry="builtin:cnn", max_steps=200, checkpoint_every_steps=20)


@pytest.fixture(scope="module")
def trained_cnn(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    run_dir = tmp_path_factory.mktemp("cnn") / "r"
    code, stderr, events = run(CNN, run_dir)
    assert code == 0, stderr
    return Trained(run_dir, events)


def test_the_builtin_cnn_learns(trained_cnn: Trained) -> None:
    events = trained_cnn.events
    loss = losses(events)
    assert len(loss) == 200
    assert sum(loss[-10:]) / 10 < 0.5 * sum(loss[:10]) / 10
    result = events[-1]
    assert (result["status"], result["reason"]) == ("succeeded", "training finished")
    assert result["summary"]["loss_last"] == loss[-1]
    # The final step is always checkpointed.
    assert by_type(events, "checkpoint")[-1]["step"] == 199


def test_the_builtin_language_model_learns(tmp_path: Path) -> None:
    code, _, events = run(training(entry="builtin:lm", max_steps=80), tmp_path / "r")
    assert code == 0
    loss = losses(events)
    # From ln 32 = 3.47 toward the synthetic language's entropy, about 0.9.
    assert loss[0] > 3.0
    assert sum(loss[-10:]) / 10 < 1.5


def test_two_processes_on_gloo(tmp_path: Path) -> None:
    code, stderr, events = run(
        training(entry="builtin:cnn", devices=2, max_steps=40, metric_ranks="all"), tmp_path / "r"
    )
    assert code == 0, stderr
    # Each rank's lines come prefixed with it, and keep it (the log's rank selector).
    announced = {
        e["rank"]: e["line"] for e in by_type(events, "log") if "npulab: rank" in e["line"]
    }
    assert announced[0].startswith("[rank0]: npulab: rank 0 of 2, local rank 0")
    assert announced[1].startswith("[rank1]: npulab: rank 1 of 2, local rank 1")
    # Rank 0's loss is the run's, one point per step; rank 1's (metric_ranks) its own series.
    assert len(losses(events)) == 40
    ranked = [e for e in by_type(events, "metric") if e["key"] == "loss@rank1"]
    assert [e["step"] for e in ranked] == list(range(40))


def start(spec: dict, run_dir: Path) -> subprocess.Popen:
    spec_path = run_dir.parent / "spec.json"
    spec_path.write_text(json.dumps(spec))
    return subprocess.Popen(
        [sys.executable, "-m", "workers.run", str(spec_path), "--run-dir", str(run_dir)],
        env=dict(os.environ, PYTHONPATH=str(REPO_DIR)),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def kill_when(run_dir: Path, process: subprocess.Popen, losses_seen: int) -> None:
    """kill -9 the whole run once it logged this many losses, as a host crash would."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        path = run_dir / "events.jsonl"
        if path.exists() and len(losses(list(iter_events(str(path))))) >= losses_seen:
            break
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    kill_registered(str(run_dir))
    process.wait()


def complete_checkpoints(run_dir: Path) -> list[int]:
    return sorted(int(path.name[5:]) for path in (run_dir / "checkpoints").glob("step-*"))


def test_a_killed_run_resumes_from_its_last_checkpoint(
    tmp_path: Path, trained_cnn: Trained
) -> None:
    run_dir = tmp_path / "r"
    kill_when(run_dir, start(CNN, run_dir), losses_seen=45)
    # Events are buffered, so the run got further than 45 steps: to its newest checkpoint.
    newest = complete_checkpoints(run_dir)[-1]
    assert 39 <= newest < 199
    code, _, events = run(CNN, run_dir)  # the same command again, the same run directory
    assert code == 0
    resume = by_type(events, "resume")
    assert [r["step"] for r in resume] == [newest]
    after = [
        e for e in by_type(events, "metric") if e["key"] == "loss" and e["time"] > resume[0]["time"]
    ]
    assert [e["step"] for e in after] == list(range(newest + 1, 200))
    # Restored weights, optimizer, scheduler and RNG: the same losses as without the crash.
    reference_loss = {
        e["step"]: e["value"] for e in by_type(trained_cnn.events, "metric") if e["key"] == "loss"
    }
    for event in after:
        assert event["value"] == pytest.approx(reference_loss[event["step"]], rel=1e-4)


def test_a_run_killed_after_its_last_checkpoint_finishes_on_restart(
    tmp_path: Path, trained_cnn: Trained
) -> None:
    # As if killed between the last checkpoint and the end: nothing is left to train.
    code, stderr, events = run(CNN, trained_cnn.copy(tmp_path / "r"))
    assert code == 0, stderr
    assert [r["step"] for r in by_type(events, "resume")] == [199]
    result = events[-1]
    assert (result["type"], result["status"]) == ("result", "succeeded")
    assert result["summary"]["loss_last"] == trained_cnn.events[-1]["summary"]["loss_last"]


def test_a_damaged_newest_checkpoint_falls_back_to_the_previous(
    tmp_path: Path, trained_cnn: Trained
) -> None:
    run_dir = trained_cnn.copy(tmp_path / "r")
    newest = run_dir / "checkpoints" / "step-000000000199" / "state.pt"
    with open(newest, "r+b") as handle:
        handle.seek(100)
        handle.write(b"\x00" * 16)
    code, _, events = run(dict(CNN, max_steps=220), run_dir)
    assert code == 0
    damaged = by_type(events, "checkpoint_damaged")
    assert [(d["step"], d["reason"]) for d in damaged] == [
        (199, "state.pt fails its SHA-256 check")
    ]
    assert by_type(events, "resume")[-1]["step"] == 179
    warning = [
        e["line"] for e in by_type(events, "log") if e["line"].startswith("warning: checkpoint")
    ]
    assert warning == [
        "warning: checkpoint of step 199 is damaged (state.pt fails its SHA-256 check); "
        "trying an older one"
    ]


def test_an_unmodified_script_runs_as_it_is(tmp_path: Path) -> None:
    workdir = tmp_path / "code"
    workdir.mkdir()
    (workdir / "train.py").write_text(
        "import os, sys\n"
        "print('epoch 1 accuracy 0.5', flush=True)\n"
        "print('bad batch', file=sys.stderr, flush=True)\n"
        "print('cwd', os.getcwd(), 'args', sys.argv[1:], flush=True)\n"
        "sys.exit(3)\n"
    )
    spec = training(entry="train.py", args=["--lr", "0.1"], workdir=str(workdir))
    code, _, events = run(spec, tmp_path / "r")
    assert code == 1
    logs = {(e["stream"], e["line"]) for e in by_type(events, "log")}
    assert ("stdout", "epoch 1 accuracy 0.5") in logs
    assert ("stderr", "bad batch") in logs
    assert ("stdout", f"cwd {workdir} args ['--lr', '0.1']") in logs
    result = events[-1]
    assert (result["reason"], result["cause"]) == (
        "the training process exited with code 3",
        "process_exit",
    )


def test_a_module_function_entry(tmp_path: Path) -> None:
    package = tmp_path / "code"
    package.mkdir()
    (package / "mytrain.py").write_text(
        "from workers import track\n"
        "def main():\n"
        "    run = track.init()\n"
        "    for step in range(3):\n"
        "        run.log(step, loss=1.0 / (step + 1))\n"
    )
    spec = training(entry="mytrain:main", workdir=str(package))
    code, _, events = run(spec, tmp_path / "r")
    assert code == 0
    assert losses(events) == [1.0, 0.5, 1 / 3]


def test_a_hung_training_loop_is_stopped_by_the_watchdog(tmp_path: Path) -> None:
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    (code_dir / "hang.py").write_text(
        "import time\n"
        "from workers import track\n"
        "run = track.init()\n"
        "run.log(0, loss=1.0)\n"
        "time.sleep(600)  # a collective that never returns\n"
    )
    spec = training(entry="hang.py", workdir=str(code_dir), heartbeat_timeout_s=1)
    started = time.monotonic()
    code, _, events = run(spec, tmp_path / "r")
    assert code == 1
    assert time.monotonic() - started < 120
    result = events[-1]
    assert (result["cause"], result["reason"]) == (
        "heartbeat_timeout",
        "no heartbeat from the training loop for 1 s",
    )
    pgid = int((tmp_path / "r" / "process-groups").read_text().split()[0])
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


def test_a_missing_workdir_fails_clearly(tmp_path: Path) -> None:
    code, _, events = run(training(entry="x.py", workdir="nowhere"), tmp_path / "r")
    assert code == 1
    assert (events[-1]["reason"], events[-1]["cause"]) == (
        f"workdir {tmp_path / 'r' / 'nowhere'} does not exist",
        "job_error",
    )


def test_a_missing_script_is_a_job_error_named_by_its_exception(tmp_path: Path) -> None:
    code, _, events = run(training(entry="missing.py"), tmp_path / "r")
    assert code == 1
    result = events[-1]
    assert (result["cause"], result["reason"]) == (
        "job_error",
        "FileNotFoundError: [Errno 2] No such file or directory: "
        f"'{tmp_path / 'r' / 'missing.py'}'",
    )
    # The traceback is still the run's log.
    stderr = [e["line"] for e in by_type(events, "log") if e["stream"] == "stderr"]
    assert "Traceback (most recent call last):" in stderr


def test_an_import_error_of_the_entry_is_a_job_error(tmp_path: Path) -> None:
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    (code_dir / "train.py").write_text("import mymodel\n")
    code, _, events = run(training(entry="train:main", workdir=str(code_dir)), tmp_path / "r")
    assert code == 1
    result = events[-1]
    assert (result["cause"], result["reason"]) == (
        "job_error",
        "ModuleNotFoundError: No module named 'mymodel'",
    )


def test_an_exception_after_the_first_step_is_no_job_error(tmp_path: Path) -> None:
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    (code_dir / "train.py").write_text(
        "from workers import track\n"
        "run = track.init()\n"
        "run.log(0, loss=1.0)\n"
        "raise RuntimeError('the device went away')\n"
    )
    code, _, events = run(training(entry="train.py", workdir=str(code_dir)), tmp_path / "r")
    assert code == 1
    result = events[-1]
    assert (result["cause"], result["reason"]) == (
        "process_exit",
        "the training process exited with code 1: RuntimeError: the device went away",
    )


def test_training_specs_are_validated(tmp_path: Path) -> None:
    code, stderr, _ = run(training(entry="rm -rf /", precision="fp8"), tmp_path / "r")
    assert code == 2
    assert "entry: must be a script path ending in .py" in stderr
    assert "precision: must be one of: fp32, fp16, bf16" in stderr
