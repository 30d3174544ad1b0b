"""Secrets stay out of snapshots, specs shown to users and logs: by name, and inside URLs."""

from __future__ import annotations

import pytest

from workers.contract.redact import redact_env, redact_text


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("postgres://app:pw@db:5432/app", "postgres://app:<redacted>@db:5432/app"),
        ("redis://:s3cret@cache:6379/0", "redis://:<redacted>@cache:6379/0"),
        (
            "connecting to https://ci-bot:ghp_abc123@git.example.org/repo.git now",
            "connecting to https://ci-bot:<redacted>@git.example.org/repo.git now",
        ),
        ("https://example.org/path?q=a:b@c", "https://example.org/path?q=a:b@c"),
        ("postgres://app@db/app", "postgres://app@db/app"),
        ("no url here: a:b@c", "no url here: a:b@c"),
    ],
)
def test_the_password_of_a_url_is_redacted_wherever_it_appears(text: str, shown: str) -> None:
    assert redact_text(text) == shown


def test_env_values_are_redacted_by_name_and_urls_inside_any_value() -> None:
    env = {
        "DB_URL": "postgres://app:pw@db/app",
        "HCCL_PASSWORD": "x",
        "AWS_SECRET_ACCESS_KEY": "abc",
        "HF_TOKEN": "hf_1234567",
        "MODE": "fast",
    }
    assert redact_env(env) == {
        "DB_URL": "postgres://app:<redacted>@db/app",
        "HCCL_PASSWORD": "<redacted>",
        "AWS_SECRET_ACCESS_KEY": "<redacted>",
        "HF_TOKEN": "<redacted>",
        "MODE": "fast",
    }
