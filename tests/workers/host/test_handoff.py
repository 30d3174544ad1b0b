"""The handoff capability on the host: what another host of the run handed over is fetched
into the run directory, whole and checked, or a note says why not."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tests.waiting import wait_until
from tests.workers.host.fakes import FakePlatform
from workers.contract import script_env
from workers.contract.capabilities import HANDOFF, HANDOFF_FILES
from workers.contract.events import ARTIFACT
from workers.host import capabilities
from workers.host.handoff import HandoffOnHost

DUMP = b"side a's dump" * 1000


def hooks(tmp_path: Path, platform: FakePlatform) -> HandoffOnHost:
    run_dir = tmp_path / "runs" / "7" / "attempt-1"
    attempt = capabilities.Attempt(platform, 7, 1, str(run_dir), str(run_dir.parent), {})
    made = HandoffOnHost(attempt)
    for folder in made.directories():
        os.makedirs(folder)
    return made


def listed(file_id: int, data: bytes, name: str = "parity-side-a.tar") -> dict:
    return {
        HANDOFF_FILES: [
            {
                "id": file_id,
                "name": name,
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        ]
    }


def test_parity_runs_get_the_handoff_folder_named_to_the_run(tmp_path: Path) -> None:
    assert HandoffOnHost in capabilities.for_kind("parity")
    assert HandoffOnHost.name == HANDOFF
    made = hooks(tmp_path, FakePlatform())
    folder = str(tmp_path / "runs" / "7" / "attempt-1" / "handoff")
    assert made.directories() == [folder]
    assert made.env() == {script_env.HANDOFF_DIR: folder}


def test_a_listed_file_is_fetched_once_whole_into_the_folder(tmp_path: Path) -> None:
    platform = FakePlatform()
    platform.handoff[3] = DUMP
    made = hooks(tmp_path, platform)
    target = Path(made.directory) / "parity-side-a.tar"
    made.acknowledged([], listed(3, DUMP))
    wait_until(target.exists, "the handed file")
    assert target.read_bytes() == DUMP
    # Listed again with every later acknowledgement: never fetched again.
    made.acknowledged([], listed(3, DUMP))
    assert platform.count("download_handoff") == 1
    assert sorted(os.listdir(made.directory)) == ["parity-side-a.tar"]


def test_what_this_host_handed_over_itself_is_never_fetched_back(tmp_path: Path) -> None:
    platform = FakePlatform()
    platform.handoff[3] = DUMP
    made = hooks(tmp_path, platform)
    own = {"type": ARTIFACT, "kind": HANDOFF, "name": "parity-side-a.tar", "path": "x"}
    made.acknowledged([own], listed(3, DUMP))
    assert platform.count("download_handoff") == 0


def test_an_outage_is_ridden_out_and_a_bad_copy_fetched_again(tmp_path: Path) -> None:
    platform = FakePlatform()
    platform.handoff[3] = DUMP
    platform.fail_next("download_handoff")
    made = hooks(tmp_path, platform)
    target = Path(made.directory) / "parity-side-a.tar"
    made.acknowledged([], listed(3, DUMP))
    wait_until(target.exists, "the handed file after an outage", timeout=60)
    assert target.read_bytes() == DUMP


def test_a_file_that_cannot_be_fetched_leaves_a_note_for_the_run(tmp_path: Path) -> None:
    platform = FakePlatform()
    platform.handoff[3] = b"not what was stored"
    made = hooks(tmp_path, platform)
    note = Path(made.directory) / "parity-side-a.tar.failed"
    made.acknowledged([], listed(3, DUMP))
    wait_until(note.exists, "the note", timeout=60)
    assert "do not match SHA-256" in note.read_text()
    assert not (Path(made.directory) / "parity-side-a.tar").exists()
    assert platform.count("download_handoff") == 3
    # Refused (gone from the platform): a note at once.
    made.acknowledged([], listed(4, DUMP, name="other.tar"))
    wait_until((Path(made.directory) / "other.tar.failed").exists, "the refusal's note")
    assert "HTTP 404" in (Path(made.directory) / "other.tar.failed").read_text()


def test_a_link_put_in_place_of_the_folder_is_never_followed(tmp_path: Path) -> None:
    platform = FakePlatform()
    platform.handoff[3] = DUMP
    made = hooks(tmp_path, platform)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.rmdir(made.directory)
    os.symlink(elsewhere, made.directory)
    # In this thread: it ends once it gave up on the folder.
    made.fetch(3, "parity-side-a.tar", hashlib.sha256(DUMP).hexdigest())
    assert platform.count("download_handoff") == 0
    assert os.listdir(elsewhere) == []


def test_names_that_are_no_plain_file_name_are_ignored(tmp_path: Path) -> None:
    platform = FakePlatform()
    made = hooks(tmp_path, platform)
    for name in ("../escape", ".hidden", "a/b", ""):
        made.acknowledged([], listed(5, DUMP, name=name))
    made.acknowledged([], {HANDOFF_FILES: "not a list"})
    assert platform.count("download_handoff") == 0
