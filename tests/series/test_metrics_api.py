"""A run's series through the API: rows, columns and CSV; pages; streamed long reads."""

from __future__ import annotations

import csv
import gc
import io
from urllib.parse import parse_qs, urlsplit

import numpy as np
import orjson
import pytest

from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_claim_run, do_submit_run
from npulab.series import encode
from npulab.series.ingest import insert_points
from npulab.series.owners import Owner
from npulab.series.reads import MAX_PAGE, Page

pytestmark = pytest.mark.django_db
SMOKE = {"kind": "smoke", "device_type": "cpu"}


@pytest.fixture
def url(owner, cpu_host) -> str:
    """A run's metrics URL; its "loss" has steps 0-49 with step 10 logged twice, 7 a NaN."""
    run = do_submit_run(owner, SMOKE)
    place_queued_runs()
    do_claim_run(cpu_host, run.pk, 1)
    points = [(step, None if step == 7 else step / 2, 100.0 + step) for step in range(50)]
    points.insert(11, (10, -1.0, 111.0))
    insert_points(Owner.of_run(run.pk), {"loss": points}, attempt=1)
    return f"/api/v1/runs/{run.pk}/metrics/"


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_the_row_form_is_unchanged(api, url) -> None:
    got = api.get(url, {"key": "loss"}).json()

    assert list(got) == ["key", "total", "downsampled", "points"]
    assert (got["total"], got["downsampled"], len(got["points"])) == (51, False, 51)
    assert got["points"][6:12] == [[6, 3.0], [7, None], [8, 4.0], [9, 4.5], [10, 5.0], [10, -1.0]]
    assert api.get(url, {"key": "nothing"}).json() == {
        "key": "nothing",
        "total": 0,
        "downsampled": False,
        "points": [],
    }


def test_columns_give_one_array_per_column(api, url) -> None:
    response = api.get(url, {"key": "loss", "format": "columns"})

    assert response["Content-Type"] == "application/json"
    got = response.json()
    assert (got["key"], got["total"], got["downsampled"]) == ("loss", 51, False)
    rows = api.get(url, {"key": "loss"}).json()["points"]
    assert [list(point) for point in zip(got["step"], got["value"], strict=True)] == rows
    assert got["time"][:3] == [100.0, 101.0, 102.0]

    down = api.get(url, {"key": "loss", "format": "columns", "points": 5}).json()
    buckets = api.get(url, {"key": "loss", "points": 5}).json()["points"]
    assert down["downsampled"] is True
    columns = [down[name] for name in ("step", "mean", "min", "max")]
    assert [list(bucket) for bucket in zip(*columns, strict=True)] == buckets


def test_csv_has_a_header_and_empty_missing_values(api, url) -> None:
    for params in ({"format": "csv"}, {}):
        headers = {} if params else {"HTTP_ACCEPT": "text/csv"}
        response = api.get(url, {"key": "loss", **params}, **headers)
        assert response["Content-Type"] == "text/csv; charset=utf-8"
        lines = list(csv.reader(io.StringIO(body(response).decode())))
        assert lines[0] == ["step", "value", "time"]
        assert lines[8] == ["7", "", "107.0"]
        assert len(lines) == 52

    down = body(api.get(url, {"key": "loss", "format": "csv", "points": 5})).decode()
    buckets = api.get(url, {"key": "loss", "points": 5}).json()["points"]
    lines = down.splitlines()
    assert lines[0] == "step,mean,min,max"
    assert [[float(field) for field in line.split(",")] for line in lines[1:]] == buckets


@pytest.mark.parametrize("form", ["json", "columns", "csv"])
def test_pages_cover_the_series_once_and_keep_a_steps_repeats_together(api, url, form) -> None:
    whole = api.get(url, {"key": "loss", "format": "columns"}).json()
    steps: list[int] = []
    params = {"key": "loss", "format": form, "limit": 10}
    next_url: str | None = url
    while next_url is not None:
        response = api.get(next_url, params)
        params = {}
        if form == "csv":
            lines = body(response).decode().splitlines()[1:]
            steps += [int(line.split(",")[0]) for line in lines]
            link = response.get("Link")
            next_url = link[1 : link.index(">")] if link else None
            continue
        got = response.json()
        steps += got["step"] if form == "columns" else [point[0] for point in got["points"]]
        next_url = got["next"]
    assert steps == whole["step"]

    # A page whose 11th point is step 10's first takes its second too: 12 points.
    first = api.get(url, {"key": "loss", "limit": 11, "after_step": -1}).json()
    assert [point[0] for point in first["points"]] == [*range(11), 10]
    query = parse_qs(urlsplit(first["next"]).query)
    assert query == {"key": ["loss"], "limit": ["11"], "after_step": ["10"]}
    last = api.get(url, {"key": "loss", "after_step": 40}).json()
    assert ([p[0] for p in last["points"]], last["next"]) == (list(range(41, 50)), None)


@pytest.mark.parametrize("form", ["json", "columns", "csv"])
def test_a_long_whole_read_is_streamed_with_the_same_body(api, url, form, monkeypatch) -> None:
    whole = body(api.get(url, {"key": "loss", "format": form}))
    monkeypatch.setattr(encode, "STREAM_PAGE", 4)

    response = api.get(url, {"key": "loss", "format": form})

    assert response.streaming
    if form == "csv":
        assert body(response) == whole
    else:
        assert orjson.loads(body(response)) == orjson.loads(whole)


def test_rows_are_made_and_written_without_collections(monkeypatch) -> None:
    steps = np.arange(20_000)
    page = Page({"step": steps, "value": steps / 2})
    made = encode._rows
    collecting: list[bool] = []

    def rows(page: Page) -> list:
        collecting.append(gc.isenabled())
        return made(page)

    monkeypatch.setattr(encode, "_rows", rows)

    written = encode.rows({"key": "loss"}, page)
    lines = encode.csv(page)
    after = gc.isenabled()
    gc.disable()
    try:
        encode.rows({"key": "loss"}, page)
        # Left as it was: a process that turned collections off keeps them off.
        assert not gc.isenabled()
    finally:
        gc.enable()

    assert (collecting, after) == ([False, False, False], True)
    assert orjson.loads(written)["points"][-1] == [19_999, 9_999.5]
    assert lines.count(b"\n") == len(steps) + 1


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"points": "0"}, "points"),
        ({"points": "x"}, "points"),
        ({"after_step": "1.5"}, "after_step"),
        ({"limit": "0"}, "limit"),
        ({"limit": str(MAX_PAGE + 1)}, "limit"),
        ({"points": "5", "limit": "5"}, "limit"),
        ({"points": "5", "after_step": "5"}, "after_step"),
        ({"format": "xml"}, "format"),
        ({"format": "csv", "limit": "-1"}, "limit"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(api, url, params, field) -> None:
    response = api.get(url, {"key": "loss", **params})

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    got = response.json()
    assert (got["code"], list(got)) == ("invalid", ["code", "detail", field])
