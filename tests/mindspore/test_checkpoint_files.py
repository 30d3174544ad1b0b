"""Checkpoint files a script writes itself: verified, adopted, restored; a cut one is not used."""

from __future__ import annotations

import json
import os
import struct
import zipfile
from pathlib import Path

import pytest

from workers.track import checkpoint as store
from workers.training.checkpoint_files import CheckpointFiles, Damaged, restore, verify_file


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def ckpt(*names: str) -> bytes:
    """MindSpore's Checkpoint message: a Value (tag, TensorProto) per parameter."""
    tensor = _varint(1 << 3) + _varint(4) + _field(2, b"Float32") + _field(3, b"\0" * 16)
    return b"".join(_field(1, _field(1, name.encode()) + _field(2, tensor)) for name in names)


def safetensors(data: bytes) -> bytes:
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    return struct.pack("<Q", len(header)) + header + data


@pytest.mark.parametrize(
    ("name", "content"),
    [("net-1_8.ckpt", ckpt("w", "b")), ("model.safetensors", safetensors(b"\0" * 16))],
)
def test_whole_files_verify_and_cut_ones_do_not(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    verify_file(str(path))
    path.write_bytes(content[:-5])
    with pytest.raises(Damaged, match="cut short"):
        verify_file(str(path))


def test_a_torch_save_archive_verifies_until_cut(tmp_path: Path) -> None:
    path = tmp_path / "state.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", b"x" * 100)
    verify_file(str(path))
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(Damaged, match=r"torch\.save"):
        verify_file(str(path))


@pytest.mark.parametrize("content", [b"", b"\x0f\x01"])
def test_empty_or_foreign_files_are_no_checkpoints(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.ckpt"
    path.write_bytes(content)
    with pytest.raises(Damaged):
        verify_file(str(path))


def test_files_are_adopted_in_order_and_a_truncated_one_is_refused(tmp_path: Path) -> None:
    files, store_dir = tmp_path / "ckpt", tmp_path / "store"
    files.mkdir()
    announced, warnings = [], []
    watcher = CheckpointFiles(str(files), str(store_dir), 5, announced.append, warnings.append)
    (files / "net-1_8.ckpt").write_bytes(ckpt("w"))
    os.utime(files / "net-1_8.ckpt", (1, 1))
    (files / "net-2_8.ckpt").write_bytes(ckpt("w", "b")[:-3])
    watcher.poll(final=True)
    assert [info.step for info in announced] == [1]
    assert warnings == [
        "checkpoint file net-2_8.ckpt is damaged, not kept: cut short: a field of 34 bytes "
        "at offset 38, the file ends 31 bytes later"
    ]
    assert store.verify(str(store_dir), 1).bytes == len(ckpt("w"))
    # Polled again, nothing is adopted twice.
    watcher.poll(final=True)
    assert len(announced) == 1


def test_a_file_still_being_written_waits_for_the_next_poll(tmp_path: Path) -> None:
    files = tmp_path / "ckpt"
    files.mkdir()
    announced: list = []
    watcher = CheckpointFiles(str(files), str(tmp_path / "s"), 5, announced.append, print)
    (files / "net-1_8.ckpt").write_bytes(ckpt("w"))
    assert watcher.poll() == []  # first seen: its size may still grow


def test_resume_restores_the_newest_file_that_verifies(tmp_path: Path) -> None:
    files, store_dir = tmp_path / "ckpt", tmp_path / "store"
    files.mkdir()
    watcher = CheckpointFiles(str(files), str(store_dir), 5, lambda info: None, print)
    for index, name in enumerate(["net-1_8.ckpt", "net-2_8.ckpt"]):
        (files / name).write_bytes(ckpt("w" * (index + 1)))
        os.utime(files / name, (index + 1, index + 1))
    watcher.poll(final=True)
    # The newest is damaged in the store (a disk error, a copy cut short).
    state = store_dir / store.step_dir_name(2) / store.STATE_FILE
    state.write_bytes(state.read_bytes()[:-4])
    warnings: list[str] = []
    target = tmp_path / "attempt-2"
    restored = restore(str(store_dir), str(target), ".ckpt", warnings.append)
    assert restored == str(target / "net-1_8.ckpt")
    assert (target / "net-1_8.ckpt").read_bytes() == ckpt("w")
    assert warnings[0].startswith("checkpoint 2 is damaged, the previous one is used")


def test_nothing_to_restore_is_an_empty_path(tmp_path: Path) -> None:
    assert restore(str(tmp_path / "none"), str(tmp_path / "d"), ".pt", print) == ""
