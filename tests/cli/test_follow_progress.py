"""The CLI's progress line shows the platform's `progress` of a running run."""

from __future__ import annotations

from workers.cli.follow import _progress_text


def test_a_training_run_shows_step_of_total_speed_and_eta() -> None:
    run = {
        "id": 7,
        "status": "running",
        "host": "cpu-01",
        "progress": {"step": 100, "total_steps": 1000, "steps_per_s": 2.0, "eta_s": 450.0},
    }
    text, key = _progress_text(run, 65.0)
    assert text == "run 7 running on cpu-01 · step 100/1000 at 2.0/s, ETA 7m30s · 1m05s"
    # A log line per change of state, not per step.
    assert key == "run 7 running on cpu-01"


def test_a_smoke_run_shows_the_step_running_now() -> None:
    run = {
        "id": 8,
        "status": "running",
        "progress": {"step": None, "running_step": 2, "running_s": 12.5},
    }
    assert _progress_text(run, 13.0)[0] == "run 8 running · step 2 running 12s · 13s"


def test_a_smoke_run_names_the_step_running_now_when_the_platform_knows_it() -> None:
    run = {
        "id": 8,
        "status": "running",
        "progress": {"running_step": 2, "running_step_name": "matmul", "running_s": 4.0},
    }
    text, key = _progress_text(run, 5.0)
    assert text == "run 8 running · step matmul running 4s · 5s"
    # Off a terminal, a line as each named step begins, not one per second it runs.
    assert key == "run 8 running · step matmul"


def test_an_ended_run_shows_no_progress() -> None:
    run = {"id": 9, "status": "succeeded", "progress": {"step": 300, "total_steps": 300}}
    assert _progress_text(run, 5.0)[0] == "run 9 succeeded · 5s"
