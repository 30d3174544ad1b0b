from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from npulab.conf import Env


@pytest.mark.parametrize(
    ("raw", "value"), [("1", True), ("Yes", True), ("off", False), ("", False)]
)
def test_booleans(raw: str, value: bool) -> None:
    assert Env({"X": raw}).bool("X", not value) is value


def test_a_bad_boolean_names_the_variable() -> None:
    with pytest.raises(
        ImproperlyConfigured, match="NPULAB_DEBUG must be true or false, got 'maybe'"
    ):
        Env({"NPULAB_DEBUG": "maybe"}).bool("NPULAB_DEBUG", False)


def test_integers_are_checked() -> None:
    assert Env({}).int("N", 5) == 5
    with pytest.raises(ImproperlyConfigured, match="N must be an integer"):
        Env({"N": "five"}).int("N", 5)
    with pytest.raises(ImproperlyConfigured, match="N must be at least 10, got 3"):
        Env({"N": "3"}).int("N", 20, minimum=10)


def test_lists_split_on_commas() -> None:
    assert Env({"H": " a.example, b ,"}).list("H", []) == ["a.example", "b"]


def test_database_urls() -> None:
    pg = Env({"DATABASE_URL": "postgres://u:p@db:5432/npulab"}).database("DATABASE_URL", "")
    assert (pg["ENGINE"], pg["NAME"], pg["HOST"]) == (
        "django.db.backends.postgresql",
        "npulab",
        "db",
    )
    lite = Env({}).database("DATABASE_URL", "sqlite:////tmp/x.sqlite3")
    assert lite["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    # Kept between requests on both: opening a SQLite connection was most of a small one.
    assert lite["CONN_MAX_AGE"] == pg["CONN_MAX_AGE"] == 60
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL is not a database URL"):
        Env({"DATABASE_URL": "nosuchdb://x"}).database("DATABASE_URL", "")


def test_secret_key_from_env_or_file(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("from-file\n")
    assert Env({"K": "from-env"}).secret_key("K", "KF", key_file) == "from-env"
    assert Env({}).secret_key("K", "KF", key_file) == "from-file"
    with pytest.raises(ImproperlyConfigured, match="No secret key: set K"):
        Env({}).secret_key("K", "KF", tmp_path / "missing")
