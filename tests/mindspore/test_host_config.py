"""A host worker with a MindSpore interpreter: its label, and which interpreter a run gets."""

from __future__ import annotations

from workers.host.config import HostConfig

BASE = ["--broker-url", "redis://127.0.0.1:6379/7", "--python", "/envs/torch/bin/python"]


def config(*argv: str, **env: str) -> HostConfig:
    import os
    from unittest import mock

    with mock.patch.dict(os.environ, {"NPULAB_HOST_TOKEN": "t", **env}):
        return HostConfig.from_args([*BASE, *argv])


def test_without_mindspore_the_host_has_no_label_and_one_interpreter() -> None:
    host = config("--labels", "910b")
    assert host.labels == ["910b"]
    assert host.python_for({"framework": "mindspore"}) == "/envs/torch/bin/python"


def test_a_mindspore_interpreter_labels_the_host_and_runs_mindspore_runs() -> None:
    host = config(NPULAB_MINDSPORE_PYTHON="/envs/ms/bin/python")
    assert host.labels == ["mindspore"]
    assert host.python_for({"framework": "mindspore"}) == "/envs/ms/bin/python"
    assert host.python_for({"framework": "pytorch"}) == "/envs/torch/bin/python"
    # A spec's own interpreter always wins.
    assert host.python_for({"framework": "mindspore", "python": "/x/python"}) == "/x/python"


def test_the_label_is_not_doubled() -> None:
    host = config("--mindspore-python", "/envs/ms/bin/python", "--labels", "mindspore,a")
    assert host.labels == ["mindspore", "a"]
