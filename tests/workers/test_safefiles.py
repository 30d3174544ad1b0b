"""Files a root worker writes in a run's folders: never through a link the run put there."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from workers.host.agent import kill_run_processes
from workers.processes import CHILD_PID_FILE, GROUPS_FILE, write_pid_file
from workers.safefiles import (
    drop_links,
    held,
    open_file,
    read_text,
    real_dir,
    touch,
    write_whole,
)
from workers.track import checkpoint


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim"
    path.write_text("untouched")
    return path


def plant(folder: Path, name: str, target: Path) -> Path:
    """A link the run leaves at ``name``, and at the names a writer of it used to take."""
    folder.mkdir(parents=True, exist_ok=True)
    for each in (name, f"{name}.tmp", f"{name}.{os.getpid()}.tmp"):
        (folder / each).symlink_to(target)
    return folder / name


def test_a_whole_write_replaces_a_link_at_its_name_and_writes_nothing_through_it(
    tmp_path: Path, victim: Path
) -> None:
    path = plant(tmp_path / "run", "state.json", victim)
    write_whole(str(path), b"mine", durable=True)
    touch(str(tmp_path / "run" / "state.json.tmp"))
    assert victim.read_text() == "untouched"
    assert not path.is_symlink()
    assert path.read_bytes() == b"mine"
    assert not [p.name for p in (tmp_path / "run").iterdir() if p.name.startswith(".state")]


def test_reading_through_a_link_is_refused(tmp_path: Path, victim: Path) -> None:
    path = plant(tmp_path / "run", "forwarded.offset", victim)
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        read_text(str(path))


def test_a_link_in_place_of_a_folder_or_a_file_is_dropped_and_its_target_kept(
    tmp_path: Path, victim: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "attempt-2").symlink_to(elsewhere)
    folder = Path(real_dir(str(tmp_path / "runs" / "attempt-2")))
    assert folder.is_dir()
    assert not folder.is_symlink()
    assert elsewhere.is_dir()
    (folder / "spec.json").symlink_to(victim)
    (folder / "events.jsonl").write_text("kept\n")
    assert drop_links(str(folder), ("spec.json", "events.jsonl", "absent")) == ["spec.json"]
    assert victim.read_text() == "untouched"
    assert (folder / "events.jsonl").read_text() == "kept\n"


def test_pid_files_and_checkpoint_marks_the_worker_writes_go_through_no_link(
    tmp_path: Path, victim: Path
) -> None:
    run_dir = tmp_path / "attempt-1"
    write_pid_file(str(plant(run_dir, "supervisor.pid", victim)), 1234)
    assert (run_dir / "supervisor.pid").read_text() == "1234"
    directory = tmp_path / "checkpoints"
    plant(directory, checkpoint.PINS_FILE, victim)
    checkpoint.set_pinned(str(directory), {5, 10})
    assert checkpoint.pinned(str(directory)) == {5, 10}
    mark = Path(checkpoint._settled_path(str(directory), 5))
    mark.symlink_to(victim)
    checkpoint.settle(str(directory), 5)
    assert checkpoint.settled(str(directory), 5)
    assert not mark.is_symlink()
    assert victim.read_text() == "untouched"


def test_a_held_folder_is_walked_to_past_no_link_and_stays_itself_when_renamed(
    tmp_path: Path,
) -> None:
    (tmp_path / "top" / "rank-1").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "top" / "rank-2").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "link").symlink_to(tmp_path / "top")
    for root, names in ((tmp_path / "top", ["rank-2"]), (tmp_path / "link", [])):
        with pytest.raises(OSError) as refused, held(str(root), *names):  # noqa: PT011
            pass
        assert refused.value.errno in (errno.ELOOP, errno.ENOTDIR)
    with held(str(tmp_path / "top"), "rank-1") as folder:
        # The run moves the folder and puts a link to another in its place: the worker's
        # mark still lands in the folder it walked to.
        (tmp_path / "top" / "rank-1").rename(tmp_path / "top" / "moved")
        (tmp_path / "top" / "rank-1").symlink_to(tmp_path / "elsewhere")
        touch(os.path.join(folder, ".mark"))
        write_whole(os.path.join(folder, "pins.json"), b"[1]")
    assert sorted(os.listdir(tmp_path / "top" / "moved")) == [".mark", "pins.json"]
    assert os.listdir(tmp_path / "elsewhere") == []


def test_a_fifo_the_run_leaves_in_place_of_its_process_files_does_not_hang_the_worker(
    tmp_path: Path,
) -> None:
    # The worker reads these as it stops a run; a fifo would block its open for good.
    run_dir = tmp_path / "attempt-1"
    run_dir.mkdir()
    os.mkfifo(run_dir / GROUPS_FILE)
    os.mkfifo(run_dir / CHILD_PID_FILE)
    stopper = threading.Thread(target=kill_run_processes, args=(str(run_dir), 2**22 + 1))
    stopper.daemon = True
    stopper.start()
    stopper.join(timeout=60)
    assert not stopper.is_alive()
    with pytest.raises(OSError) as refused:  # noqa: PT011
        read_text(str(run_dir / GROUPS_FILE))
    assert refused.value.errno == errno.EINVAL
    # Nor one in place of a file it appends to (its log, the spool) with no one reading.
    with pytest.raises(OSError) as refused:  # noqa: PT011
        open_file(str(run_dir / GROUPS_FILE), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    assert refused.value.errno in (errno.ENXIO, errno.EINVAL)
