"""A parity run's layers as CSV and in msprobe's xlsx layout (its compare result's columns),
with npulab's verdict in ``Result`` and the broken thresholds in ``Err_message``."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

from npulab.parity.models import ParityLayer
from workers.kinds.parity import LAYER_FIELDS

CSV_COLUMNS = list(LAYER_FIELDS)
# msprobe's compare result (CompareConst): side B is its "NPU", side A its "Bench".
MSPROBE_COLUMNS = [
    "NPU Name",
    "Bench Name",
    "NPU Dtype",
    "Bench Dtype",
    "NPU Tensor Shape",
    "Bench Tensor Shape",
    "Cosine",
    "EucDist",
    "MaxAbsErr",
    "MaxRelativeErr",
    "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio",
    "Result",
    "Err_message",
    "NPU_Stack_Info",
]


def _cells(layer: ParityLayer) -> list[object]:
    return [
        layer.index,
        layer.name,
        layer.dtype_a,
        layer.dtype_b,
        layer.shape_a,
        layer.shape_b,
        layer.cosine,
        layer.euc_dist,
        layer.max_abs_err,
        layer.max_rel_err,
        layer.one_thousandth_ratio,
        layer.five_thousandth_ratio,
        " ".join(layer.broken),
        layer.nan,
        " | ".join(layer.stack),
    ]


def as_csv(layers: Iterable[ParityLayer]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for layer in layers:
        writer.writerow(["" if cell is None else cell for cell in _cells(layer)])
    return out.getvalue().encode("utf-8")


def as_xlsx(layers: Iterable[ParityLayer]) -> bytes:
    from openpyxl import Workbook

    book = Workbook(write_only=True)
    sheet = book.create_sheet("compare_result")
    sheet.append(MSPROBE_COLUMNS)
    for layer in layers:
        sheet.append(
            [
                layer.name,
                layer.name if "missing" not in layer.broken else "N/A",
                layer.dtype_b,
                layer.dtype_a,
                layer.shape_b,
                layer.shape_a,
                layer.cosine,
                layer.euc_dist,
                layer.max_abs_err,
                layer.max_rel_err,
                layer.one_thousandth_ratio,
                layer.five_thousandth_ratio,
                "error" if layer.broken else "pass",
                ", ".join(layer.broken),
                "\n".join(layer.stack),
            ]
        )
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()
