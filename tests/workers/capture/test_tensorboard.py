"""TensorBoard event files read with TensorBoard's own loader: late, rotating and damaged files."""

from __future__ import annotations

from pathlib import Path

from torch.utils.tensorboard import SummaryWriter

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
