"""MindSpore's own error output: a graph compile error names the failing script line."""

from __future__ import annotations

from tests.paths import REPO_DIR
from workers.training.mindspore_logs import graph_compile_error

SAMPLES = REPO_DIR / "tests" / "fixtures" / "mindspore"


def sample(name: str) -> list[str]:
    return (SAMPLES / name).read_text(encoding="utf-8").splitlines()[1:]


def test_a_captured_compile_error_gives_the_exception_and_the_failing_line() -> None:
    lines = sample("local_graph-compile-error_Unsupported-expression-Set.txt")
    assert graph_compile_error(lines) == (
        "graph compile error: RuntimeError: Unsupported expression 'Set'. at "
        "/work/wt/mindspore/tests/mindspore/bad_graph.py:10: y = {1, 2}"
    )


def test_device_errors_are_no_compile_errors() -> None:
    for path in SAMPLES.glob("*.txt"):
        if not path.name.startswith("local_graph"):
            assert graph_compile_error(sample(path.name)) == "", path.name


def test_every_sample_names_its_source() -> None:
    for path in SAMPLES.glob("*.txt"):
        assert path.read_text(encoding="utf-8").startswith("# source: "), path.name
