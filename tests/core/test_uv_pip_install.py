"""deploy/uv_pip_install.py: the Makefile's installs go through uv under pip's settings."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.paths import REPO_DIR

# A script, not a module of a package: the Makefile runs it before anything is installed.
uv_pip_install = SimpleNamespace(**runpy.run_path(str(REPO_DIR / "deploy" / "uv_pip_install.py")))

LISTING = """\
global.cert='/etc/ssl/certs/site.pem'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/more/simple'
global.find-links='/opt/global-wheels'
global.index-url='https://mirror.example/simple'
download.find-links='/not/for/install'
install.find-links='/opt/install-wheels'
:env:.find-links='/opt/wheels /opt/wheels-too'
:env:.default-timeout='180'
"""


def test_the_environment_wins_over_a_files_install_section_which_wins_over_its_global() -> None:
    settings = uv_pip_install.pip_settings(LISTING)
    assert settings["find-links"] == "/opt/wheels /opt/wheels-too"
    assert settings["index-url"] == "https://mirror.example/simple"
    assert settings["default-timeout"] == "180"
    listing = LISTING.replace(":env:.find-links='/opt/wheels /opt/wheels-too'\n", "")
    assert uv_pip_install.pip_settings(listing)["find-links"] == "/opt/install-wheels"


def test_pips_settings_become_uvs_arguments_one_value_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("ALL_PROXY", raising=False)
    arguments, environment = uv_pip_install.uv_options(uv_pip_install.pip_settings(LISTING))
    assert arguments == [
        "--index-url",
        "https://mirror.example/simple",
        "--extra-index-url",
        "file:///opt/pypi/simple",
        "--extra-index-url",
        "file:///opt/more/simple",
        "--find-links",
        "/opt/wheels",
        "--find-links",
        "/opt/wheels-too",
        "--constraints",
        "/etc/xdg/pip/constraints.txt",
    ]
    assert environment == {"SSL_CERT_FILE": "/etc/ssl/certs/site.pem"}
    # A CA bundle the caller names itself is kept.
    monkeypatch.setenv("SSL_CERT_FILE", "/mine.pem")
    assert uv_pip_install.uv_options({"cert": "/etc/ssl/certs/site.pem"})[1] == {}
    proxy = {"proxy": "http://proxy.example:3128"}
    assert uv_pip_install.uv_options(proxy)[1] == {"ALL_PROXY": "http://proxy.example:3128"}
    assert uv_pip_install.uv_options({"no-index": "yes"})[0] == ["--no-index"]
    assert uv_pip_install.uv_options({"no-index": "false"})[0] == []


def fake_uv(tmp_path: Path) -> tuple[Path, Path]:
    """An executable that records the arguments it was called with and exits 3."""
    record = tmp_path / "call.json"
    uv = tmp_path / "uv"
    uv.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"open({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
        "sys.exit(3)\n"
    )
    uv.chmod(0o755)
    return uv, record


def test_uv_installs_into_this_interpreter_with_bytecode_under_the_live_pip_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uv, record = fake_uv(tmp_path)
    # The real `pip config list` of this interpreter, with a setting from the environment.
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    assert uv_pip_install.main([str(uv), "torch==2.13.0", "-e", "."]) == 3
    call = json.loads(record.read_text())
    assert call[:5] == ["pip", "install", "--quiet", "--python", sys.executable]
    assert "--compile-bytecode" in call
    assert call[call.index("--index-strategy") + 1] == "unsafe-best-match"
    assert call[call.index("--find-links") + 1] == str(tmp_path / "wheels")
    assert call[-3:] == ["torch==2.13.0", "-e", "."]


def test_without_requirements_it_says_how_to_call_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert uv_pip_install.main(["uv"]) == 2
    assert "usage:" in capsys.readouterr().err
