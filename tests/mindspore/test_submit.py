"""A MindSpore run goes only to a host with MindSpore, and is refused when there is none."""

from __future__ import annotations

import pytest

from npulab.core.errors import SubmissionInvalid
from npulab.runs.services import NO_HOST_HINT, do_submit_run
from tests.conftest import register
from tests.factories import HostFactory

pytestmark = pytest.mark.django_db


def mindspore_run(**fields: object) -> dict:
    return {
        "kind": "training",
        "device_type": "cpu",
        "entry": "train.py",
        "framework": "mindspore",
        **fields,
    }


def mindspore_host(name: str, labels: tuple[str, ...] = ("mindspore",)) -> None:
    """A host whose worker has a MindSpore interpreter (it reports the label), labelled so
    by an operator unless ``labels`` says otherwise."""
    register(HostFactory(name=name, labels=list(labels)), "cpu", 1, labels=["mindspore"])


def test_without_a_mindspore_host_the_run_is_refused_saying_which_lacks_what(owner) -> None:
    register(HostFactory(name="cpu-01"), "cpu", 1)
    # Its worker has MindSpore; an operator has not said so.
    mindspore_host("cpu-02", labels=())
    # An operator says so; its worker has no MindSpore interpreter.
    register(HostFactory(name="cpu-03", labels=["mindspore"]), "cpu", 1)
    with pytest.raises(SubmissionInvalid) as refused:
        do_submit_run(owner, mindspore_run())
    assert refused.value.errors == {
        "labels": "no cpu host carries label(s) mindspore: "
        "cpu-01 has none (its worker reports no MindSpore interpreter (--mindspore-python) "
        "either), "
        "cpu-02 has none (its worker reports mindspore; an operator gives labels: "
        "host_token --labels, or the admin), "
        "cpu-03 has mindspore, but its worker reports no MindSpore interpreter "
        "(--mindspore-python)" + NO_HOST_HINT
    }


def test_a_run_naming_its_own_interpreter_needs_only_the_operators_label(owner) -> None:
    register(HostFactory(name="cpu-03", labels=["mindspore"]), "cpu", 1)
    run = do_submit_run(owner, mindspore_run(python="/envs/ms/bin/python"))
    assert run.labels == ["mindspore"]


def test_a_waiting_run_says_which_host_lacks_mindspore(owner) -> None:
    from npulab.runs.placement import Capacity, pending_reason

    host = register(HostFactory(name="cpu-03", labels=["mindspore"]), "cpu", 1)
    run = do_submit_run(owner, {**mindspore_run(), "wait_for_host": True})
    reason = pending_reason(run, [Capacity(host, alive=True, free=[0])])
    assert reason == (
        "no online cpu host with label(s) mindspore (cpu-03 has label(s) mindspore, but its "
        "worker reports no MindSpore interpreter (--mindspore-python))"
    )


def test_a_mindspore_run_asks_for_the_mindspore_label(owner) -> None:
    register(HostFactory(name="cpu-01"), "cpu", 1)
    mindspore_host("cpu-ms")
    run = do_submit_run(owner, {**mindspore_run(), "labels": ["x"], "wait_for_host": True})
    assert run.labels == ["x", "mindspore"]
    run = do_submit_run(owner, mindspore_run())
    assert run.labels == ["mindspore"]


def test_a_pytorch_run_needs_no_label(owner) -> None:
    register(HostFactory(name="cpu-01"), "cpu", 1)
    run = do_submit_run(owner, {**mindspore_run(), "framework": "pytorch"})
    assert run.labels == []


def test_an_invalid_combination_is_a_400_naming_the_field(api) -> None:
    mindspore_host("cpu-ms")
    response = api.post("/api/v1/runs/", mindspore_run(amp_level="O2"), format="json")
    assert response.status_code == 400
    assert "loss_scale_manager" in response.json()


def test_the_review_compares_mindspore_runs_only_with_their_own_kind_of_job() -> None:
    from npulab.runs.models import Run
    from npulab.training.kind import TRAINING

    spec = {"entry": "train.py", "args": [], "precision": "fp32", "max_steps": 0}
    pytorch = Run(spec={**spec, "framework": "pytorch"}, devices=1)
    graph = Run(spec={**spec, "framework": "mindspore", "mode": "graph", "amp_level": "O2"})
    graph.devices = 1
    assert TRAINING.review_group(pytorch) == "train.py"
    assert TRAINING.review_group(graph) == "train.py · mindspore graph O2"
