"""An outage logs one line per failure, other errors their traceback (core.logs)."""

from __future__ import annotations

import logging
import sys

import psycopg
import pytest
from celery.beat import SchedulingError
from django.db import OperationalError
from kombu import Connection
from kombu.exceptions import OperationalError as OperationalErrorOfBroker

from harness.stack import free_port
from npulab.core.logs import OutageFilter


def record_of(exc: BaseException) -> logging.LogRecord:
    try:
        raise exc
    except BaseException:
        info = sys.exc_info()
    return logging.LogRecord(
        "django.request", logging.ERROR, __file__, 1, "failed: %s", ("/x",), info
    )


def refused() -> OperationalError:
    """What Django raises when the server is gone: its error, caused by the driver's."""
    try:
        psycopg.connect(host="127.0.0.1", port=free_port(), user="x", connect_timeout=5)
    except psycopg.OperationalError as driver:
        try:
            raise OperationalError(str(driver)) from driver
        except OperationalError as wrapped:
            return wrapped
    pytest.fail("a connection to a closed port succeeded")


def test_a_lost_connection_is_one_line() -> None:
    record = record_of(refused())
    assert OutageFilter().filter(record)
    assert record.exc_info is None
    line = logging.Formatter("%(message)s").format(record)
    assert line.startswith("failed: /x (the database is unreachable: connection failed: ")
    assert "\n" not in line


def test_a_broker_that_refuses_is_one_line() -> None:
    with (
        Connection(f"redis://127.0.0.1:{free_port()}/0") as broker,
        pytest.raises(OperationalErrorOfBroker) as refused_by,
    ):
        broker.ensure_connection(max_retries=1)
    record = record_of(refused_by.value)
    assert OutageFilter().filter(record)
    line = logging.Formatter("%(message)s").format(record)
    assert line.startswith("failed: /x (the broker is unreachable: ")
    assert "\n" not in line


def test_beats_wrapped_broker_error_is_its_first_line() -> None:
    try:
        try:
            raise OperationalErrorOfBroker("Error 111 connecting to 127.0.0.1:1. Refused.")
        except OperationalErrorOfBroker as exc:
            raise SchedulingError(f"Couldn't apply scheduled task tick: {exc}") from exc
    except SchedulingError as wrapped:
        record = record_of(wrapped)
    record.msg, record.args = "Message Error: %s\n%s", (record.exc_info[1], ["  File ..."])
    assert OutageFilter().filter(record)
    assert logging.Formatter("%(message)s").format(record) == (
        "Message Error: Couldn't apply scheduled task tick: Error 111 connecting to "
        "127.0.0.1:1. Refused. (the broker is unreachable)"
    )


def test_any_other_error_keeps_its_traceback() -> None:
    record = record_of(ValueError("a bug"))
    assert OutageFilter().filter(record)
    assert "Traceback" in logging.Formatter().format(record)
