"""TensorBoard event files read with TensorBoard's own loader: late, rotating and damaged files."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from torch.utils.tensorboard import SummaryWriter

from tests.paths import REPO_DIR
from workers.capture import record_crc
from workers.capture.sink import Sink
from workers.capture.tensorboard import TensorBoardReader
from workers.contract.capture import TENSORBOARD
from workers.events import EventWriter, iter_events


def reader(tmp_path: Path) -> tuple[TensorBoardReader, EventWriter]:
    writer = EventWriter(str(tmp_path / "events.jsonl"))
    return TensorBoardReader([str(tmp_path / "tb")], Sink(writer, TENSORBOARD, 100)), writer


def metrics(tmp_path: Path) -> list[tuple[str, int, float]]:
    events = iter_events(str(tmp_path / "events.jsonl"))
    return [(e["key"], e["step"], e["value"]) for e in events if e["type"] == "metric"]


def test_a_growing_file_is_read_on_from_where_it_was(tmp_path: Path) -> None:
    found, events = reader(tmp_path)
    board = SummaryWriter(str(tmp_path / "tb"))
    board.add_scalar("loss", 1.0, 0)
    board.flush()
    found.read_once()
    board.add_scalar("loss", 0.5, 1)
    board.close()
    found.read_once()
    found.read_once()
    events.close()
    assert metrics(tmp_path) == [("loss", 0, 1.0), ("loss", 1, 0.5)]


def test_a_truncated_file_is_said_once_and_the_others_still_read(tmp_path: Path) -> None:
    board = SummaryWriter(str(tmp_path / "tb" / "a"))
    for step in range(100):
        board.add_scalar("loss", float(step), step)
    board.close()
    [damaged] = (tmp_path / "tb" / "a").glob("events.out.tfevents.*")
    data = damaged.read_bytes()
    damaged.write_bytes(data[: len(data) - 7])
    garbage = tmp_path / "tb" / "b" / "events.out.tfevents.garbage"
    garbage.parent.mkdir()
    garbage.write_bytes(b"\x00\xff" * 5000)
    good = SummaryWriter(str(tmp_path / "tb" / "c"))
    good.add_scalar("acc", 0.9, 3)
    good.close()
    found, events = reader(tmp_path)
    found.start()
    found.stop()
    events.close()
    points = metrics(tmp_path)
    assert ("acc", 3, 0.9) in [(k, s, round(v, 6)) for k, s, v in points]
    # Every whole record of the cut file is read.
    assert len([p for p in points if p[0] == "loss"]) == 99
    lines = [e["line"] for e in iter_events(str(tmp_path / "events.jsonl")) if e["type"] == "log"]
    assert any("events.out.tfevents.garbage" in line for line in lines)


def test_histograms_and_images_are_counted_by_tag_not_stored(tmp_path: Path) -> None:
    import numpy as np

    board = SummaryWriter(str(tmp_path / "tb"))
    for step in range(3):
        board.add_scalar("loss", 1.0 / (step + 1), step)
        board.add_histogram("weights", np.arange(10.0) * step, step)
    board.add_image("sample", np.zeros((3, 4, 4)), 0)
    board.close()
    found, events = reader(tmp_path)
    found.start()
    found.stop()
    events.close()
    assert {key for key, _, _ in metrics(tmp_path)} == {"loss"}
    assert sum(found.others.values()) == 4
    # Counted under one kind per tag, whatever TensorBoard's version calls the kind.
    by_tag = {tuple(tags): found.others[kind] for kind, tags in found.other_tags.items()}
    assert by_tag == {("weights",): 3, ("sample",): 1}
    lines = [e["line"] for e in iter_events(str(tmp_path / "events.jsonl")) if e["type"] == "log"]
    [notice] = [line for line in lines if "not stored as metrics" in line]
    assert "x3 (weights)" in notice
    assert "x1 (sample)" in notice


def log_lines(tmp_path: Path) -> list[str]:
    return [e["line"] for e in iter_events(str(tmp_path / "events.jsonl")) if e["type"] == "log"]


def record_offsets(path: Path) -> list[tuple[int, int]]:
    """(start, length of the data) of each record of a TFRecord file, to damage one."""
    data = path.read_bytes()
    found, offset = [], 0
    while offset < len(data):
        (length,) = struct.unpack("<Q", data[offset : offset + 8])
        found.append((offset, length))
        offset += 8 + 4 + length + 4
    return found


def test_a_record_whose_data_does_not_match_its_crc_is_refused(tmp_path: Path) -> None:
    board = SummaryWriter(str(tmp_path / "tb"))
    for step in range(10):
        board.add_scalar("loss", float(step), step)
    board.close()
    [path] = (tmp_path / "tb").glob("events.out.tfevents.*")
    # Record 0 is the file's version; record 6 holds step 5. One bit of its data flipped.
    start, length = record_offsets(path)[6]
    data = bytearray(path.read_bytes())
    data[start + 12 + length // 2] ^= 0x01
    path.write_bytes(bytes(data))
    found, events = reader(tmp_path)
    found.start()
    found.stop()
    events.close()
    # The check ran in C, through TensorBoard's own reader, and caught it.
    assert record_crc.install() == record_crc.C
    assert [step for key, step, _ in metrics(tmp_path)] == [0, 1, 2, 3, 4]
    # TensorBoard's reader stops at the record (as at a cut one), and the run is told.
    left = len(data) - start
    assert f"the last {left} bytes are a cut or damaged record, not read" in "".join(
        log_lines(tmp_path)
    )


# Reads tmp_path/tb in a process of its own, with google_crc32c as the test has it.
CHECK = """
import json, sys, types
{google_crc32c}
from tensorboard.compat.tensorflow_stub import pywrap_tensorflow
from workers.capture import record_crc
from workers.capture.sink import Sink
from workers.capture.tensorboard import TensorBoardReader
from workers.events import EventWriter
events = EventWriter(sys.argv[1] + "/events.jsonl")
found = TensorBoardReader([sys.argv[1] + "/tb"], Sink(events, "tensorboard", 100))
found.start()
found.stop()
events.close()
print(json.dumps({{
    "checked_with": record_crc.install(),
    "crc_of": pywrap_tensorflow.masked_crc32c.__module__,
    "scalars": found.scalars,
}}))
"""
MISSING = "sys.modules['google_crc32c'] = None"
IN_PYTHON = "sys.modules['google_crc32c'] = types.SimpleNamespace(implementation='python')"
WRONG = (
    "sys.modules['google_crc32c'] = types.SimpleNamespace(implementation='c', value=lambda data: 0)"
)


@pytest.mark.parametrize(
    ("google_crc32c", "checked_with", "crc_of"),
    [
        ("", record_crc.C, "workers.capture.record_crc"),
        (MISSING, record_crc.PYTHON, "tensorboard.compat.tensorflow_stub.pywrap_tensorflow"),
        (IN_PYTHON, record_crc.PYTHON, "tensorboard.compat.tensorflow_stub.pywrap_tensorflow"),
        (WRONG, record_crc.PYTHON, "tensorboard.compat.tensorflow_stub.pywrap_tensorflow"),
    ],
    ids=["installed", "missing", "its-python-fallback", "sums-that-differ"],
)
def test_the_c_crc_is_used_only_when_it_is_there_and_agrees(
    tmp_path: Path, google_crc32c: str, checked_with: str, crc_of: str
) -> None:
    board = SummaryWriter(str(tmp_path / "tb"))
    for step in range(50):
        board.add_scalar("loss", 1.0 / (step + 1), step)
    board.close()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(CHECK.format(google_crc32c=google_crc32c)),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_DIR)},
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert (answer["checked_with"], answer["crc_of"]) == (checked_with, crc_of)
    # Either way every scalar is read; without the C CRC the run is told why it is slow.
    assert answer["scalars"] == 50
    assert [step for _, step, _ in metrics(tmp_path)] == list(range(50))
    said = any("google-crc32c" in line for line in log_lines(tmp_path))
    assert said == (checked_with == record_crc.PYTHON)


def test_one_tag_from_several_directories_keeps_each_series_apart(tmp_path: Path) -> None:
    # add_scalars writes its series into folders of their own beside the writer's, each
    # under the main tag; a script's own train/ and val/ writers both log "loss".
    board = SummaryWriter(str(tmp_path / "tb" / "exp"))
    for step in range(2):
        board.add_scalar("train/loss", 1.0 / (step + 1), step)
        board.add_scalars("acc", {"train": 0.5, "val": 0.25}, step)
        board.add_scalars("loss/all", {"a": 2.0}, step)
    board.close()
    for phase, value in (("train", 3.0), ("val", 4.0)):
        own = SummaryWriter(str(tmp_path / "tb" / "split" / phase))
        own.add_scalar("loss", value, 0)
        own.close()
    found, events = reader(tmp_path)
    found.read_once()
    # A tag that one more directory writes later leaves the keys already given as they are.
    late = SummaryWriter(str(tmp_path / "tb" / "split" / "test"))
    late.add_scalar("loss", 5.0, 0)
    late.close()
    found.read_once()
    events.close()
    assert sorted(set(metrics(tmp_path))) == [
        ("acc/train", 0, 0.5),
        ("acc/train", 1, 0.5),
        ("acc/val", 0, 0.25),
        ("acc/val", 1, 0.25),
        ("loss", 0, 3.0),
        ("loss/all/a", 0, 2.0),
        ("loss/all/a", 1, 2.0),
        ("loss/test", 0, 5.0),
        ("loss/val", 0, 4.0),
        ("train/loss", 0, 1.0),
        ("train/loss", 1, 0.5),
    ]
