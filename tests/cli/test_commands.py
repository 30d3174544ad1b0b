"""``npulab`` commands against the live server: what people read, what scripts parse, exit codes."""

from __future__ import annotations

import json
import os
import stat
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from harness.stack import free_port
from npulab.accounts.services import do_issue_api_token, do_revoke_api_token
from npulab.runs.models import Run
from npulab.snapshots.services import do_record_snapshot
from tests.cli.conftest import as_json, finished_run, log_lines
from workers.contract import exits

pytestmark = pytest.mark.django_db(transaction=True)


# -- reading -------------------------------------------------------------------------


def test_runs_list_is_a_table_newest_first_and_a_list_in_json(npulab, owner) -> None:
    old = finished_run(owner)
    new = finished_run(owner, Run.Status.FAILED, exits.PROCESS_EXIT)

    text = npulab("runs", "list")
    assert text.exit_code == exits.CLI_SUCCEEDED, text.stderr
    header, *rows = text.stdout.splitlines()
    assert header.split()[:4] == ["ID", "KIND", "NAME", "STATUS"]
    assert [row.split()[0] for row in rows] == [str(new.pk), str(old.pk)]
    assert "failed" in rows[0]
    assert "1 cpu" in rows[0]

    listed = as_json(npulab("runs", "list", "--json", "--status", "succeeded"))
    assert [run["id"] for run in listed] == [old.pk]
    # --json works before the command too.
    assert [run["id"] for run in as_json(npulab("--json", "runs", "list"))] == [new.pk, old.pk]


def test_runs_show_prints_the_steps_and_json_is_the_run_detail(npulab, owner) -> None:
    run = finished_run(
        owner,
        Run.Status.FAILED,
        exits.PROCESS_EXIT,
        steps=[("device", "pass"), ("matmul", "fail")],
        reason="matmul: max abs error 3.0 > 0.001",
    )
    log_lines(run, "npulab runner", "the last line")

    shown = npulab("runs", "show", str(run.pk), "--log-lines", "1")
    assert shown.exit_code == exits.CLI_SUCCEEDED
    reason = next(line for line in shown.stdout.splitlines() if line.startswith("exit reason:"))
    assert reason.split(":", 1)[1].strip() == "matmul: max abs error 3.0 > 0.001"
    assert "max abs error 3.0 > 0.001" in shown.stdout
    step_rows = [
        line.split()[:2]
        for line in shown.stdout.splitlines()
        if line.split()[:1] in (["device"], ["matmul"])
    ]
    assert step_rows == [["device", "pass"], ["matmul", "fail"]]
    assert shown.stdout.rstrip().endswith("the last line")

    detail = as_json(npulab("runs", "show", str(run.pk), "--json"))
    assert (detail["id"], detail["status"]) == (run.pk, "failed")
    assert [s["name"] for s in detail["steps"]] == ["device", "matmul"]


def test_a_missing_run_is_invalid_input(npulab) -> None:
    missing = npulab("runs", "show", "999999")
    assert missing.exit_code == exits.CLI_USAGE
    assert "error:" in missing.stderr
    body = as_json(npulab("runs", "show", "999999", "--json"))
    assert body["exit_code"] == exits.CLI_USAGE
    assert body["error"]["status"] == 404
    assert body["error"]["code"] == "not_found"


def test_runs_logs_prints_the_lines_or_their_tail_or_json_lines(npulab, owner) -> None:
    run = finished_run(owner)
    log_lines(run, "one", "two", "three")
    assert npulab("runs", "logs", str(run.pk)).stdout.splitlines() == ["one", "two", "three"]
    assert npulab("runs", "logs", str(run.pk), "--tail", "2").stdout.splitlines() == [
        "two",
        "three",
    ]
    events = [
        json.loads(line)
        for line in npulab("runs", "logs", str(run.pk), "--json").stdout.splitlines()
    ]
    assert [e["data"]["line"] for e in events] == ["one", "two", "three"]
    # --follow on an ended run prints everything and returns.
    assert npulab("runs", "logs", str(run.pk), "--follow").stdout.splitlines() == [
        "one",
        "two",
        "three",
    ]


def test_hosts_list_and_show(npulab, cpu_host) -> None:
    listed = npulab("hosts", "list")
    assert listed.exit_code == 0
    assert "cpu-01" in listed.stdout
    assert "0/1" in listed.stdout
    shown = as_json(npulab("hosts", "show", "cpu-01", "--json"))
    assert (shown["name"], shown["device_count"]) == ("cpu-01", 1)
    assert "cpu-0" in npulab("hosts", "show", "cpu-01").stdout


def test_kinds_show_lists_the_fields_submit_takes(npulab) -> None:
    assert "smoke" in npulab("kinds", "list").stdout
    shown = npulab("kinds", "show", "smoke")
    assert "--matmul-size" in shown.stdout
    assert "2048" in shown.stdout
    # And submit --kind smoke --help is built from the same declaration.
    helped = npulab("submit", "--kind", "smoke", "--help")
    assert helped.exit_code == 0
    assert "--matmul-size" in helped.stdout
    assert "--train-steps" in helped.stdout


def test_snapshot_show_and_diff(npulab, cpu_host, document) -> None:
    a = do_record_snapshot(cpu_host, document(torch_npu="2.1.0.post8")).snapshot
    b = do_record_snapshot(cpu_host, document(torch_npu="2.5.1")).snapshot
    shown = npulab("snapshot", "show", str(a.pk))
    assert shown.exit_code == 0
    assert "compatibility:" in shown.stdout
    assert "cpu-01" in shown.stdout
    assert as_json(npulab("snapshot", "show", str(a.pk), "--json"))["id"] == a.pk
    diff = npulab("snapshot", "diff", str(a.pk), str(b.pk))
    assert "torch_npu: 2.1.0.post8 → 2.5.1" in diff.stdout
    assert as_json(npulab("snapshot", "diff", str(a.pk), str(b.pk), "--json"))["versions"] == [
        {"name": "torch_npu", "from": "2.1.0.post8", "to": "2.5.1"}
    ]


def test_review_of_a_plan_gives_the_verdict_and_can_gate_on_it(npulab, cpu_host, document) -> None:
    do_record_snapshot(cpu_host, document(torch="2.1.0", torch_npu="2.1.0.post8", cann="8.0.RC3"))
    plan = ("review", "--host", "cpu-01", "--plan", "cann=8.3.RC1,torch_npu=2.6.0")
    text = npulab(*plan)
    assert text.exit_code == exits.CLI_SUCCEEDED
    assert text.stdout.startswith("cpu-01: CAUTION")
    assert "a planned target has no runs" in text.stdout
    body = as_json(npulab(*plan, "--json"))
    assert body["decision"] == "caution"
    assert body["planned"] == {"cann": "8.3.RC1", "torch_npu": "2.6.0"}
    assert npulab(*plan, "--fail-on", "caution").exit_code == exits.CLI_JOB_FAILED
    assert npulab(*plan, "--fail-on", "no-go").exit_code == exits.CLI_SUCCEEDED
    neither = npulab("review", "--host", "cpu-01")
    assert neither.exit_code == exits.CLI_USAGE


def test_review_of_a_target_snapshot(npulab, cpu_host, document) -> None:
    do_record_snapshot(cpu_host, document(torch_npu="2.1.0.post8"))
    target = do_record_snapshot(cpu_host, document(torch_npu="2.5.1")).snapshot
    body = as_json(npulab("review", "--host", "cpu-01", "--target", str(target.pk), "--json"))
    assert body["target"]["id"] == target.pk
    assert body["decision"] in ("go", "caution", "no-go")


def test_compare_prints_each_number_and_fails_on_regressions(npulab, owner, tmp_path) -> None:
    baseline = finished_run(owner, matmul_gflops=100.0, steps_per_s=50.0)
    candidate = finished_run(owner, matmul_gflops=80.0, steps_per_s=50.0)
    args = ("compare", str(baseline.pk), str(candidate.pk))

    text = npulab(*args)
    assert text.exit_code == exits.CLI_SUCCEEDED  # no gate asked for
    row = next(line for line in text.stdout.splitlines() if line.startswith("matmul_gflops"))
    assert "-20.0%" in row
    assert "REGRESSION" in row
    assert "1 regression" in text.stdout

    gated = npulab(*args, "--fail-on", "regressions", "--json")
    assert gated.exit_code == exits.CLI_JOB_FAILED
    assert as_json(gated)["regressions"] == 1
    loose = npulab(*args, "--fail-on", "regressions", "--threshold", "0.5")
    assert loose.exit_code == exits.CLI_SUCCEEDED


# -- submitting --------------------------------------------------------------------------


def test_submit_builds_the_spec_from_the_kinds_fields_and_prints_the_url(
    npulab, owner, cpu_host
) -> None:
    result = npulab(
        "submit",
        "--kind",
        "smoke",
        "--device-type",
        "cpu",
        "--matmul-size",
        "16",
        "--train-steps",
        "2",
        "--env",
        "MY_FLAG=1",
        "--name",
        "from options",
        "--tag",
        "ci",
        "--tag",
        "nightly",
        "--priority",
        "5",
    )
    assert result.exit_code == exits.CLI_SUCCEEDED, result.stderr
    run = Run.objects.get()
    assert result.stdout.strip() == os.environ["NPULAB_URL"] + run.get_absolute_url()
    assert (run.spec["matmul_size"], run.spec["train_steps"], run.spec["env"]) == (
        16,
        2,
        {"MY_FLAG": "1"},
    )
    assert (run.name, run.tags, run.priority, run.submitted_by) == (
        "from options",
        ["ci", "nightly"],
        5,
        owner,
    )


def test_submit_takes_metric_ranks_as_a_list_or_all(npulab, cpu_host) -> None:
    training = ("submit", "--kind", "training", "--device-type", "cpu", "--entry", "builtin:cnn")
    listed = npulab(*training, "--devices", "1", "--metric-ranks", "0")
    assert listed.exit_code == exits.CLI_SUCCEEDED, listed.stderr
    every = npulab(*training, "--metric-ranks", "all")
    assert every.exit_code == exits.CLI_SUCCEEDED, every.stderr
    assert [run.spec["metric_ranks"] for run in Run.objects.order_by("pk")] == [[0], "all"]
    beyond = npulab(*training, "--metric-ranks", "0,3")
    assert beyond.exit_code == exits.CLI_USAGE
    assert "metric_ranks: rank 3 is beyond the run's 1 rank(s)" in beyond.stderr


def test_submit_reads_a_spec_file_or_stdin(npulab, tmp_path, cpu_host) -> None:
    spec = tmp_path / "smoke.json"
    spec.write_text(json.dumps({"kind": "smoke", "device_type": "cpu", "matmul_size": 32}))
    from_file = as_json(npulab("submit", str(spec), "--set", "train_steps=3", "--json"))
    assert from_file["created"] is True
    assert (from_file["run"]["spec"]["matmul_size"], from_file["run"]["spec"]["train_steps"]) == (
        32,
        3,
    )
    from_stdin = as_json(npulab("submit", "-", "--json", input=spec.read_text()))
    assert from_stdin["run"]["spec"]["matmul_size"] == 32
    assert from_stdin["run"]["id"] != from_file["run"]["id"]


def test_a_bad_spec_exits_2_naming_every_bad_field(npulab, tmp_path) -> None:
    result = npulab(
        "submit", "--kind", "smoke", "--device-type", "cpu", "--devices", "0", "--set", "colour=1"
    )
    assert result.exit_code == exits.CLI_USAGE
    assert "devices: must be at least 1" in result.stderr
    assert "colour: unknown field for a smoke run" in result.stderr
    assert Run.objects.count() == 0

    body = as_json(npulab("submit", "--kind", "smoke", "--json"))
    assert body["exit_code"] == exits.CLI_USAGE
    assert body["error"]["status"] == 400
    assert body["error"]["body"]["device_type"] == ["this field is required"]

    for bad in ("[1, 2]", "not json"):
        spec = tmp_path / "bad.json"
        spec.write_text(bad)
        refused = npulab("submit", str(spec))
        assert refused.exit_code == exits.CLI_USAGE
        assert "SPEC" in refused.stderr
    assert npulab("submit", str(tmp_path / "absent.json")).exit_code == exits.CLI_USAGE
    assert npulab("submit").exit_code == exits.CLI_USAGE
    assert npulab("submit", "--kind", "smoke", "--no-such-option", "1").exit_code == exits.CLI_USAGE


def test_an_unknown_kind_exits_2_naming_the_known_ones(npulab) -> None:
    result = npulab("submit", "--kind", "smok", "--device-type", "cpu")
    assert result.exit_code == exits.CLI_USAGE
    assert "smoke" in result.stderr
    assert "--kind" in result.stderr


def test_the_same_idempotency_key_returns_the_run_it_made(npulab, cpu_host) -> None:
    args = (
        "submit",
        "--kind",
        "smoke",
        "--device-type",
        "cpu",
        "--idempotency-key",
        "ci-job-42",
        "--json",
    )
    first, second = as_json(npulab(*args)), as_json(npulab(*args))
    assert first["created"] is True
    assert second["created"] is False
    assert second["run"]["id"] == first["run"]["id"]
    assert Run.objects.count() == 1


def test_cancel_a_queued_run(npulab, owner, cpu_host) -> None:
    run_id = as_json(npulab("submit", "--kind", "smoke", "--device-type", "cpu", "--json"))["run"][
        "id"
    ]
    cancelled = npulab("runs", "cancel", str(run_id))
    assert cancelled.exit_code == 0
    assert cancelled.stdout.strip() == f"run {run_id} cancelled"
    again = npulab("runs", "cancel", str(run_id))
    assert again.exit_code == exits.CLI_USAGE  # 409: it already ended


# -- waiting -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "cause", "code"),
    [
        (Run.Status.SUCCEEDED, exits.COMPLETED, exits.CLI_SUCCEEDED),
        (Run.Status.FAILED, exits.PROCESS_EXIT, exits.CLI_JOB_FAILED),
        (Run.Status.FAILED, exits.TIMEOUT, exits.CLI_INFRASTRUCTURE),
        (Run.Status.FAILED, exits.START_FAILED, exits.CLI_INFRASTRUCTURE),
        (Run.Status.LOST, exits.WORKER_LOST, exits.CLI_INFRASTRUCTURE),
        (Run.Status.FAILED, exits.JOB_ERROR, exits.CLI_JOB_FAILED),
        # No host that could take it came: the platform's, not the job's.
        (Run.Status.EXPIRED, exits.NONE, exits.CLI_INFRASTRUCTURE),
        (Run.Status.CANCELLED, exits.CANCELLED, exits.CLI_CANCELLED),
    ],
)
def test_runs_wait_exits_with_how_the_run_ended(npulab, owner, status, cause, code) -> None:
    run = finished_run(owner, status, cause, reason="why")
    log_lines(run, "last words")
    result = npulab("runs", "wait", str(run.pk))
    assert result.exit_code == code, result.output
    assert "last words" in result.stdout
    body = as_json(npulab("runs", "wait", str(run.pk), "--json"))
    assert (body["exit_code"], body["run"]["id"], body["log_tail"]) == (
        code,
        run.pk,
        ["last words"],
    )


def test_submit_wait_gives_up_after_its_timeout_and_the_run_goes_on(npulab, cpu_host) -> None:
    # Two devices: cpu-01 has one, so the run waits for a host that could take it.
    result = npulab(
        "submit",
        "--kind",
        "smoke",
        "--device-type",
        "cpu",
        "--set",
        "devices=2",
        "--set",
        "wait_for_host=true",
        "--wait",
        "--timeout",
        "1",
    )
    assert result.exit_code == exits.CLI_GAVE_UP
    run = Run.objects.get()
    assert run.status == Run.Status.QUEUED
    assert f"gave up waiting after 1s: run {run.pk} is still queued" in result.stdout
    # Off a terminal the progress is one line per change, on stderr.
    assert f"run {run.pk} queued" in result.stderr
    body = as_json(npulab("runs", "wait", str(run.pk), "--timeout", "0.2", "--json", "--quiet"))
    assert (body["outcome"], body["exit_code"]) == ("gave_up", exits.CLI_GAVE_UP)


# -- who and where -------------------------------------------------------------------


def test_a_bad_token_exits_6(npulab) -> None:
    result = npulab("runs", "list", env={"NPULAB_TOKEN": "npl_not-a-token"})
    assert result.exit_code == exits.CLI_UNREACHABLE
    assert "not authorised" in result.stderr
    body = as_json(npulab("runs", "list", "--json", env={"NPULAB_TOKEN": "npl_not-a-token"}))
    assert (body["exit_code"], body["error"]["status"]) == (exits.CLI_UNREACHABLE, 401)


def test_an_expired_or_revoked_token_exits_6_with_the_platforms_code(npulab, owner) -> None:
    _, expired = do_issue_api_token(owner, expires=timezone.now() - timedelta(minutes=1))
    token, revoked = do_issue_api_token(owner)
    do_revoke_api_token(token)
    for plain, code in ((expired, "token_expired"), (revoked, "token_revoked")):
        result = npulab("runs", "list", "--json", env={"NPULAB_TOKEN": plain})
        assert result.exit_code == exits.CLI_UNREACHABLE
        assert as_json(result)["error"]["code"] == code


def test_no_token_exits_6_and_says_how_to_get_one(npulab) -> None:
    result = npulab("runs", "list", env={"NPULAB_TOKEN": ""})
    assert result.exit_code == exits.CLI_UNREACHABLE
    assert "npulab login" in result.stderr


def test_a_token_without_the_scope_exits_6(npulab, owner) -> None:
    _, read_only = do_issue_api_token(owner, scopes=["read"])
    env = {"NPULAB_TOKEN": read_only}
    assert npulab("runs", "list", env=env).exit_code == exits.CLI_SUCCEEDED
    refused = npulab("submit", "--kind", "smoke", "--device-type", "cpu", env=env)
    assert refused.exit_code == exits.CLI_UNREACHABLE
    assert "forbidden" in refused.stderr
    assert "submit" in refused.stderr
    assert Run.objects.count() == 0


def test_an_unreachable_platform_exits_6(npulab) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = npulab("runs", "list", env={"NPULAB_URL": url})
    assert result.exit_code == exits.CLI_UNREACHABLE
    assert f"could not reach the platform at {url}" in result.stderr
    # Also when the failure comes while submit --kind reads the kind's fields.
    submitted = npulab("submit", "--kind", "smoke", env={"NPULAB_URL": url})
    assert submitted.exit_code == exits.CLI_UNREACHABLE


def test_login_checks_the_token_and_keeps_it_for_later_commands(npulab, cli_env, owner) -> None:
    finished_run(owner)
    refused = npulab("login", "--token-stdin", input="npl_wrong\n", env={"NPULAB_TOKEN": ""})
    assert refused.exit_code == exits.CLI_UNREACHABLE
    assert not cli_env["config"].exists()

    logged = npulab("login", "--token-stdin", input=cli_env["token"] + "\n")
    assert logged.exit_code == 0, logged.stderr
    saved = json.loads(cli_env["config"].read_text())
    assert saved == {"url": cli_env["url"], "token": cli_env["token"]}
    assert stat.S_IMODE(cli_env["config"].stat().st_mode) == 0o600
    # Neither NPULAB_URL nor NPULAB_TOKEN: the file says where and who.
    env: dict[str, Any] = {"NPULAB_TOKEN": None, "NPULAB_URL": None}
    assert len(as_json(npulab("runs", "list", "--json", env=env))) == 1
    assert npulab("logout", env=env).exit_code == 0
    assert "token" not in json.loads(cli_env["config"].read_text())
    assert npulab("runs", "list", env=env).exit_code == exits.CLI_UNREACHABLE


# -- completion and help ---------------------------------------------------------------


def test_shell_completion_comes_from_the_command_definitions(npulab) -> None:
    script = npulab(env={"_NPULAB_COMPLETE": "bash_source"})
    assert "_npulab_completion" in script.stdout
    words = npulab(
        env={"_NPULAB_COMPLETE": "bash_complete", "COMP_WORDS": "npulab ru", "COMP_CWORD": "1"}
    )
    assert "plain,runs" in words.stdout.splitlines()
    kinds = npulab(
        env={
            "_NPULAB_COMPLETE": "bash_complete",
            "COMP_WORDS": "npulab submit --kind sm",
            "COMP_CWORD": "3",
        }
    )
    assert "plain,smoke" in kinds.stdout.splitlines()


def test_help_lists_every_command_and_the_exit_codes(npulab) -> None:
    helped = npulab("--help")
    assert helped.exit_code == 0
    for command in ("submit", "runs", "hosts", "snapshot", "review", "compare", "login"):
        assert command in helped.stdout
    assert "3  infrastructure failure (safe to retry)" in helped.stdout
