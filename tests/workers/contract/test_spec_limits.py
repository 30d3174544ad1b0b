"""The spec's bounds on text, env and args, and its paths that must stay inside the run dir."""

from __future__ import annotations

import pytest

from workers.contract import spec
from workers.contract.spec import Field, common_fields, host_path_problem, text_problem


def field(name: str) -> Field:
    return {f.name: f for f in common_fields(60)}[name]


@pytest.mark.parametrize("value", ["a\x00b", "a\ud800b"])
def test_unstorable_text_is_named(value: str) -> None:
    assert text_problem(value)
    with pytest.raises(ValueError, match=r"NUL|surrogate"):
        Field("x", "string").clean(value)
    with pytest.raises(ValueError, match="value of A"):
        field("env").clean({"A": value})
    with pytest.raises(ValueError, match=r"NUL|surrogate"):
        Field("args", "strings").clean([value])


def test_env_limits() -> None:
    env = field("env")
    env.clean({f"V{i}": "x" for i in range(spec.MAX_ENV_VARIABLES)})
    with pytest.raises(ValueError, match="at most"):
        env.clean({f"V{i}": "x" for i in range(spec.MAX_ENV_VARIABLES + 1)})
    env.clean({"A": "x" * spec.MAX_ENV_VALUE_CHARS})
    with pytest.raises(ValueError, match="value of A must be at most"):
        env.clean({"A": "x" * (spec.MAX_ENV_VALUE_CHARS + 1)})


def test_strings_limits() -> None:
    args = Field("args", "strings")
    args.clean(["a"] * spec.MAX_STRINGS)
    with pytest.raises(ValueError, match="items"):
        args.clean(["a"] * (spec.MAX_STRINGS + 1))
    with pytest.raises(ValueError, match="characters in all"):
        args.clean(["a" * (spec.MAX_STRINGS_CHARS // 2 + 1)] * 2)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("", True),
        ("sub/dir", True),
        ("a..b", True),
        ("..", False),
        ("a/../..", False),
        ("/data/alice/project", True),
        ("/data/../etc", False),
        ("..\\x", False),
    ],
)
def test_host_paths_never_climb_with_dot_dot(value: str, ok: bool) -> None:
    assert (host_path_problem(value) is None) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [("", True), ("/opt/conda/bin/python", True), ("python3", False), ("/opt/../bin/py", False)],
)
def test_python_is_an_absolute_path_or_empty(value: str, ok: bool) -> None:
    python = field("python")
    if ok:
        assert python.clean(value) == value
    else:
        with pytest.raises(ValueError, match=r"absolute path|'\.\.'"):
            python.clean(value)
