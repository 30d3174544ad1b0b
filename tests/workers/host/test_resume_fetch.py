"""A new attempt's resume fetch rides out a dropped connection, and says when it could not."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from workers.host import checkpoints as host_checkpoints
from workers.host.checkpoints import fetch_for_resume
from workers.host.client import PlatformUnavailable
from workers.track import checkpoint as checkpoints

DATA = b"the state of step 10 " * 50


class FlakyClient:
    """download_checkpoint fails ``failures`` times with a dropped connection, then serves."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def download_checkpoint(self, run_id: int, step: int, destination: str, rank: int = 0) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise PlatformUnavailable(
                "ConnectionError: ('Connection aborted.', RemoteDisconnected())"
            )
        Path(destination).write_bytes(DATA)


@pytest.fixture(autouse=True)
def _no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_checkpoints, "FETCH_FIRST_DELAY_S", 0.0)


def resume() -> dict:
    return {"step": 10, "bytes": len(DATA), "sha256": hashlib.sha256(DATA).hexdigest()}


def test_a_dropped_connection_is_tried_again_and_the_checkpoint_arrives(tmp_path: Path) -> None:
    client = FlakyClient(failures=host_checkpoints.FETCH_TRIES - 1)
    note = fetch_for_resume(client, 7, str(tmp_path), resume())
    assert note == "fetched the checkpoint of step 10 from the platform"
    assert client.calls == host_checkpoints.FETCH_TRIES
    checkpoints.verify(str(tmp_path), 10)  # whole, as the platform described it


def test_an_outage_longer_than_the_tries_is_said_and_leaves_nothing_half_written(
    tmp_path: Path,
) -> None:
    client = FlakyClient(failures=host_checkpoints.FETCH_TRIES)
    note = fetch_for_resume(client, 7, str(tmp_path), resume())
    assert note.startswith("could not fetch the checkpoint of step 10: ConnectionError")
    assert client.calls == host_checkpoints.FETCH_TRIES
    assert list(tmp_path.iterdir()) == []


def test_a_link_an_earlier_attempt_left_in_place_of_the_step_is_replaced_not_taken(
    tmp_path: Path,
) -> None:
    # Another run's checkpoint of the same step, whole: the earlier attempt's user linked it.
    other = tmp_path / "other"
    (other / checkpoints.step_dir_name(10)).mkdir(parents=True)
    (other / checkpoints.step_dir_name(10) / checkpoints.STATE_FILE).write_bytes(DATA)
    checkpoints.settle(str(other), 99)  # any file, to see that nothing else lands there
    before = sorted(path.name for path in other.rglob("*"))
    directory = tmp_path / "checkpoints"
    directory.mkdir()
    (directory / checkpoints.step_dir_name(10)).symlink_to(other / checkpoints.step_dir_name(10))

    note = fetch_for_resume(FlakyClient(failures=0), 7, str(directory), resume())

    assert note == "fetched the checkpoint of step 10 from the platform"
    assert not (directory / checkpoints.step_dir_name(10)).is_symlink()
    checkpoints.verify(str(directory), 10)
    assert sorted(path.name for path in other.rglob("*")) == before
