"""What the platform's processes log when the database or the broker goes away.

While PostgreSQL or Redis is down or restarting, every request, periodic task and
beat tick fails the same way; a traceback each (forty lines, a few a second) buries
whatever else is in the log. A lost connection is logged as the one line of the
failure with the reason, and the next attempt (the next request, the next tick)
reconnects. Any other error keeps its traceback.
"""

from __future__ import annotations

import logging

from django.db import InterfaceError, OperationalError
from kombu.exceptions import OperationalError as BrokerUnreachable
from redis.exceptions import ConnectionError as RedisConnectionError

# SQLSTATE classes of a connection that is gone: 08 (connection exception) and 57P
# (the server shut down, crashed, or cannot take connections yet).
CONNECTION_STATES = ("08", "57P")
MAX_CHAIN = 8
BROKER_ERRORS = (BrokerUnreachable, RedisConnectionError)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it (or was being handled), nearest first."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < MAX_CHAIN:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return chain


def database_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database server cannot be reached, not what a query did."""
    for seen in _chain(exc):
        if isinstance(seen, OperationalError | InterfaceError):
            cause = seen.__cause__
            if cause is not None and type(cause).__module__.startswith("psycopg"):
                state = getattr(cause, "sqlstate", None)
                return state is None or state.startswith(CONNECTION_STATES)
    return False


def unreachable(exc: BaseException) -> str:
    """What ``exc`` says cannot be reached ("database", "broker"), or "" for other errors."""
    if database_unreachable(exc):
        return "database"
    # Beat wraps the broker's error in its own SchedulingError; an ack sees Redis's.
    if any(isinstance(seen, BROKER_ERRORS) for seen in _chain(exc)):
        return "broker"
    return ""


class OutageFilter(logging.Filter):
    """One line, not a traceback, for a failure that is the database or broker unreachable."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        what = unreachable(exc) if exc is not None else ""
        if what:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            # Beat's message carries a stack dump after its first line.
            said = record.getMessage().splitlines()[0]
            detail = "" if reason in said else f": {reason}"
            record.msg = f"{said} (the {what} is unreachable{detail})"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True
