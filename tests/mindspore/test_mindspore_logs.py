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


def test_numbered_frames_of_mindspore_2_0_give_the_scripts_innermost_line() -> None:
    # MindSpore 2.0-2.3's shape (its FAQ's): frames numbered from the outermost; the
    # innermost here is MindSpore's own code, the failing line the script's before it.
    lines = [
        "Traceback (most recent call last):",
        '  File "/w/train.py", line 17, in <module>',
        "    out = net()",
        "RuntimeError: Unsupported expression 'Yield'.",
        "More details please refer to syntax support at https://www.mindspore.cn",
        "",
        "----------------------------------------------------",
        "- The Traceback of Net Construct Code:",
        "----------------------------------------------------",
        "The function call stack (See file '/w/rank_0/om/analyze_fail.ir' for more details. "
        "Get instructions about `analyze_fail.ir` at "
        "https://www.mindspore.cn/search?inputValue=analyze_fail.ir):",
        "# 0 In file /w/train.py:13",
        "        return net.trainable_params()",
        "               ^",
        "# 1 In file /venv/lib/python3.9/site-packages/mindspore/nn/cell.py:1257",
        "        return list(filter(lambda x: x.requires_grad, self.get_parameters()))",
        "                                                      ^",
    ]
    assert graph_compile_error(lines) == (
        "graph compile error: RuntimeError: Unsupported expression 'Yield'. at "
        "/w/train.py:13: return net.trainable_params()"
    )


def test_mindspore_1_x_frames_name_the_line_in_parentheses() -> None:
    # 1.x: no construct-code header, and PATH(LINE).
    lines = [
        "Traceback (most recent call last):",
        '  File "/venv/lib/python3.7/site-packages/mindspore/common/api.py", line 542, in compile',
        "    result = self._graph_executor.compile(obj, args_list, phase, use_vm)",
        "TypeError: mindspore/ccsrc/pipeline/jit/static_analysis/stack_frame.cc:85 DoJump] The "
        "parameters number of the function is 2, but the number of provided arguments is 3.",
        "FunctionGraph ID : func.18",
        "NodeInfo: In file train.py(19)",
        "    def func(x, y):",
        "",
        "The function call stack (See file '/w/rank_0/om/analyze_fail.dat' for more details):",
        "# 0 In file train.py(26)",
        "        return c",
        "        ^",
        "# 1 In file train.py(25)",
        "        c = self.mul(b, self.func(a, a, b))",
        "                        ^",
    ]
    found = graph_compile_error(lines)
    assert found.startswith("graph compile error: TypeError: ")
    assert found.endswith(" at train.py:25: c = self.mul(b, self.func(a, a, b))")


def test_device_errors_are_no_compile_errors() -> None:
    for path in SAMPLES.glob("*.txt"):
        if not path.name.startswith("local_graph"):
            assert graph_compile_error(sample(path.name)) == "", path.name


def test_every_sample_names_its_source() -> None:
    for path in SAMPLES.glob("*.txt"):
        assert path.read_text(encoding="utf-8").startswith("# source: "), path.name
