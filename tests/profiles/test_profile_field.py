"""The ``profile`` spec field in the submit form and the CLI: a JSON object, or empty."""

from __future__ import annotations

import click
import pytest

from npulab.runs.forms import RunSubmitForm
from tests.runs.test_submit_form import defaults, errors_of
from workers.cli.submit import JsonObject
from workers.contract.kinds import validate
from workers.contract.spec import PROFILE_DEFAULTS, split_submission

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("kind", ["smoke", "training"])
def test_the_form_takes_a_profiling_window_as_json_and_empty_as_none(kind: str) -> None:
    extra = {"entry": "builtin:cnn"} if kind == "training" else {}
    form = RunSubmitForm(defaults(kind, profile='{"active": 2, "record_shapes": true}', **extra))
    assert form.is_valid(), form.errors
    # The submission as the API takes it; the spec fills in the rest.
    assert form.document()["profile"] == {"active": 2, "record_shapes": True}
    spec = validate(split_submission(form.document())[0])
    assert spec["profile"] == {**PROFILE_DEFAULTS, "active": 2, "record_shapes": True}
    untouched = RunSubmitForm(defaults(kind, **extra))
    assert untouched.is_valid(), untouched.errors
    # Left empty, the field is not sent: the spec's default (no profiling window) applies.
    assert "profile" not in untouched.document()
    assert validate(split_submission(untouched.document())[0])["profile"] is None


def test_the_form_says_what_is_wrong_with_a_profile() -> None:
    assert errors_of(defaults("smoke", profile="{active: 2"))["profile"][0].startswith(
        "not valid JSON"
    )
    assert (
        "active must be an integer from 1"
        in errors_of(defaults("smoke", profile='{"active": 0}'))["profile"][0]
    )


def test_the_cli_reads_a_profile_option_as_a_json_object() -> None:
    assert JsonObject().convert('{"active": 3}', None, None) == {"active": 3}
    with pytest.raises(click.BadParameter, match="must be a JSON object"):
        JsonObject().convert("[1]", None, None)
    with pytest.raises(click.BadParameter, match="not valid JSON"):
        JsonObject().convert("{", None, None)
