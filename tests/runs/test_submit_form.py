"""The submit form: one round of validation says every problem; the run list tells runs apart."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from npulab.runs.forms import RunSubmitForm, spec_problems
from npulab.runs.models import Run
from npulab.runs.services import SubmissionInvalid, do_submit_run
from workers.contract import kinds

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def defaults(kind: str, **changes: str) -> dict[str, Any]:
    """The form's data as a browser sends it untouched, with ``changes``."""
    form = RunSubmitForm(kind=kind)
    data = {name: form[name].value() for name in form.fields}
    data = {name: "" if value is None else value for name, value in data.items()}
    data = {name: value for name, value in data.items() if value is not False}
    return {**data, "kind": kind, "device_type": "cpu", **changes}


def errors_of(data: dict[str, Any]) -> dict[str, list[str]]:
    form = RunSubmitForm(data)
    assert not form.is_valid()
    return {name: list(messages) for name, messages in form.errors.items()}


def test_every_field_problem_is_reported_in_one_round() -> None:
    errors = errors_of(
        defaults(
            "training",
            devices="0",
            timeout_hours="200",
            entry="path",
            entry_path="",
            args="--label 'open",
            env="ASCEND_GLOBAL_LOG_LEVEL=3\nnot a setting",
            max_restarts="-1",
            priority="1001",
        )
    )
    assert set(errors) == {
        "devices",
        "timeout_hours",
        "entry_path",
        "args",
        "env",
        "max_restarts",
        "priority",
    }
    assert errors["timeout_hours"] == ["Ensure this value is less than or equal to 168."]
    assert errors["args"] == ["not a valid command line: No closing quotation"]
    assert errors["env"] == ["line 2 is not KEY=VALUE: not a setting"]


def test_spec_checks_and_cross_field_checks_come_in_the_same_round() -> None:
    # The spec's own checks (dtypes, entry, env names) and coverage's cross-field ones
    # (op_set model needs an entry; list takes no filters) beside a plain form error.
    errors = errors_of(
        defaults(
            "coverage",
            devices="0",
            op_set="model",
            entry="",
            include="nn.functional.*",
            dtypes="float32 float99",
            env="NPULAB_RUN=1",
        )
    )
    assert errors["devices"] == ["Ensure this value is greater than or equal to 1."]
    assert errors["entry"] == ["op_set model needs the entry whose ops are recorded"]
    assert errors["include"] == ["op_set model tests the ops the entry called; filter with dtypes"]
    assert errors["dtypes"][0].startswith("unknown dtype(s) float99; known: float64")
    assert errors["env"] == ["NPULAB_RUN is set by npulab (spec fields, device lease)"]


def test_a_bad_entry_path_is_said_once_on_the_entry() -> None:
    errors = errors_of(defaults("coverage", op_set="model", entry="path", entry_path="notes.txt"))
    assert errors == {
        "entry": ["must be a script path ending in .py, package.module:function or builtin:<job>"]
    }


def test_cross_field_checks_leave_a_field_with_its_own_problem_alone() -> None:
    coverage = kinds.get("coverage")
    assert coverage is not None
    # ops could not be read: the check sees none and says nothing about them.
    assert spec_problems(coverage, {"device_type": "cpu", "op_set": "list"}) == {}
    assert spec_problems(coverage, {"device_type": "cpu", "op_set": "list", "ops": []}) == {
        "ops": "op_set list needs the op names to test"
    }


def test_the_timeout_is_typed_in_hours_and_minutes() -> None:
    form = RunSubmitForm(defaults("smoke", timeout_hours="1", timeout_minutes="30"))
    assert form.is_valid(), form.errors
    assert form.document()["timeout_s"] == 5400
    # Empty: the kind's default, which the form shows to start with (smoke: 15 minutes).
    assert (RunSubmitForm(kind="smoke")["timeout_hours"].value(), 15) == (
        0,
        RunSubmitForm(kind="smoke")["timeout_minutes"].value(),
    )
    empty = RunSubmitForm(defaults("smoke", timeout_hours="", timeout_minutes=""))
    assert empty.is_valid(), empty.errors
    assert empty.document()["timeout_s"] == 900
    zero = errors_of(defaults("smoke", timeout_hours="0", timeout_minutes="0"))
    assert zero == {"timeout_hours": ["The timeout must be at least 1 minute."]}
    assert "timeout_minutes" in errors_of(defaults("smoke", timeout_minutes="60"))


def test_metric_ranks_are_typed_as_a_list_or_all() -> None:
    form = RunSubmitForm(defaults("training", devices="4", metric_ranks="3, 1"))
    assert form.is_valid(), form.errors
    assert form.document()["metric_ranks"] == [3, 1]
    assert RunSubmitForm(kind="training")["metric_ranks"].value() == "0"
    assert errors_of(defaults("training", metric_ranks="one")) == {
        "metric_ranks": ['ranks such as "0, 8", or "all"']
    }
    # The run has 2 ranks (1 host × 2 devices): rank 5 is none of them.
    beyond = errors_of(defaults("training", devices="2", metric_ranks="0 5"))
    assert beyond == {"metric_ranks": ["rank 5 is beyond the run's 2 rank(s) (hosts × devices)"]}


def test_env_lines_and_the_interpreter_reach_the_spec(browser: Client, cpu_host) -> None:
    env = (
        "# what set_env.sh exports\n"
        "export ASCEND_TOOLKIT_HOME=/usr/local/Ascend/ascend-toolkit/latest\n"
        "\n"
        'ASCEND_GLOBAL_LOG_LEVEL="3"\n'
        "HCCL_CONNECT_TIMEOUT=1200\n"
    )
    python = "/opt/venvs/torch_npu/bin/python"
    response = browser.post("/runs/new/", defaults("smoke", env=env, python=python))
    assert response.status_code == 302, response.content.decode()[:2000]
    run = Run.objects.get()
    assert run.spec["python"] == python
    assert run.spec["env"] == {
        "ASCEND_TOOLKIT_HOME": "/usr/local/Ascend/ascend-toolkit/latest",
        "ASCEND_GLOBAL_LOG_LEVEL": "3",
        "HCCL_CONNECT_TIMEOUT": "1200",
    }


@pytest.mark.parametrize(
    ("changes", "entry"),
    [
        ({"entry": "builtin:lm"}, "builtin:lm"),
        ({"entry": "path", "entry_path": " train.py "}, "train.py"),
        ({"entry": "path", "entry_path": "mypkg.train:main"}, "mypkg.train:main"),
    ],
)
def test_the_entry_is_a_built_in_job_or_a_path(
    browser: Client, cpu_host, changes: dict[str, str], entry: str
) -> None:
    response = browser.post("/runs/new/", defaults("training", args="--steps 5", **changes))
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Run.objects.get().spec["entry"] == entry


def test_a_run_no_host_could_take_waits_when_asked(browser: Client) -> None:
    refused = browser.post("/runs/new/", defaults("smoke")).content.decode()
    assert 'data-error-for="device_type"' in refused
    # The form names its own box, not the API's field.
    assert "tick &quot;Wait for a host that could take it&quot; to queue it" in refused
    assert "wait_for_host: true" not in refused
    assert not Run.objects.exists()
    response = browser.post("/runs/new/", defaults("smoke", wait_for_host="on"))
    assert response.status_code == 302
    assert Run.objects.get().wait_for_host


def test_the_page_lists_every_problem_above_the_form(browser: Client) -> None:
    page = browser.post(
        "/runs/new/", defaults("training", devices="0", entry="path", entry_path="")
    ).content.decode()
    assert "Nothing was queued: 2 problems to fix." in page
    assert 'data-error-for="devices"' in page
    assert 'data-error-for="entry_path"' in page
    assert not Run.objects.exists()


def test_the_platforms_refusal_of_a_field_the_form_lacks_is_shown() -> None:
    # A refusal that names no field of the form (placement, labels) is shown above it.
    form = RunSubmitForm(defaults("smoke"))
    assert form.is_valid()
    form.add_submission_errors(
        SubmissionInvalid({"labels": "no host carries the label gpu-x", "timeout_s": "too long"})
    )
    assert form.non_field_errors() == ["labels: no host carries the label gpu-x"]
    assert form.errors["timeout_hours"] == ["too long"]


def test_a_problem_of_an_objects_key_shows_on_its_box_naming_the_key() -> None:
    parity = kinds.get("parity")
    assert parity is not None
    values = {"device_type": "cpu", "entry": "builtin:mlp", "b": {"device_type": "npu"}}
    problems = spec_problems(parity, values)
    assert list(problems) == ["b"]
    assert problems["b"].startswith("device_type: npu: a side runs on the run's device type")
    form = RunSubmitForm(defaults("parity", entry="path", entry_path="model.py"))
    assert form.is_valid(), form.errors
    form.add_submission_errors(SubmissionInvalid({"b.host": "side b: no host named 'x'"}))
    assert form.errors["b"] == ["host: side b: no host named 'x'"]


@pytest.mark.parametrize("kind", kinds.names())
def test_the_form_renders_every_declared_kind(browser: Client, kind: str) -> None:
    page = browser.get(f"/runs/new/?kind={kind}").content.decode()
    assert 'name="timeout_hours"' in page
    assert 'name="python"' in page
    assert "<textarea" in page  # env
    declared = kinds.get(kind)
    assert declared is not None
    for field in declared.fields:
        if field.name not in ("kind", "timeout_s"):
            assert f'name="{field.name}"' in page, field.name


def test_the_coverage_form_offers_its_op_sets_and_an_optional_entry(browser: Client) -> None:
    page = browser.get("/runs/new/?kind=coverage").content.decode()
    assert '<option value="opinfo" selected>opinfo</option>' in page
    assert '<option value="" selected>none</option>' in page  # entry: only for op_set model
    assert 'value="2"' in page  # the 2 h default timeout
    form = RunSubmitForm(defaults("coverage"))
    assert form.is_valid(), form.errors
    assert form.document()["entry"] == ""


def test_the_run_list_shows_the_entry_and_the_headline_numbers(
    browser: Client, owner, cpu_host
) -> None:
    run = do_submit_run(
        owner,
        {
            "kind": "training",
            "device_type": "cpu",
            "entry": "builtin:cnn",
            "args": ["--width", "8"],
            "name": "cnn width 8",
        },
    )
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.SUCCEEDED,
        result={"status": "succeeded", "summary": {"loss_first": 2.3026, "loss_last": 0.0421}},
    )
    queued = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})

    page = browser.get("/runs/").content.decode()

    assert "cnn width 8" in page
    assert "builtin:cnn --width 8" in page
    assert '<span class="text-muted">loss_last</span> 0.0421' in page
    row = page.split(f'data-run="{queued.pk}"', 1)[1].split("</tr>", 1)[0]
    assert "data-headline" not in row  # a run that has not succeeded has no numbers yet
