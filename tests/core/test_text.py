"""Text a person is shown: served file names and error messages."""

from __future__ import annotations

from pathlib import Path

from npulab.core.text import error_text, served_filename


def test_a_served_filename_loses_bidi_and_control_characters_and_folders() -> None:
    assert served_filename("report\u202efdp.exe") == "reportfdp.exe"
    assert served_filename("a\u2066b\u200fc\x07d") == "abcd"
    assert served_filename("../etc/passwd") == ".._etc_passwd"
    assert served_filename("\u202e") == "download"


def test_an_oserror_is_told_without_its_path(tmp_path: Path) -> None:
    try:
        (tmp_path / "secret" / "db.sqlite3").read_bytes()
    except OSError as error:
        told = error_text(error)
    assert told == "No such file or directory"
    assert str(tmp_path) not in told
    assert error_text(ValueError("bad value")) == "bad value"
