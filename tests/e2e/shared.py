"""The end-to-end tests' shared stack: launched when a test first needs it, stopped once
the process has run its last end-to-end test.

tests/conftest.py puts the end-to-end files first, so each pytest-xdist worker runs its
share of them, then the rest: an idle stack costs a tenth of a core in ticks and
heartbeats, and a session-scoped one idled on through every test after them.
"""

from __future__ import annotations

import contextlib
import os

import pytest
from django.conf import settings

from harness.stack import Platform, launched_platform

SHARED_PLATFORM = pytest.StashKey["SharedPlatform"]()
# The host worker's telemetry sampled and sent every 2 s, not every 10 and 30:
# tests/e2e/test_host_telemetry_e2e.py waits for two rounds of it.
TELEMETRY = {"NPULAB_TELEMETRY_S": "2", "NPULAB_TELEMETRY_SEND_S": "2"}


class SharedPlatform:
    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._tmp_path_factory = tmp_path_factory
        self._stack: contextlib.ExitStack | None = None
        self._platform: Platform | None = None

    def get(self) -> Platform:
        """The running stack, launched first if there is none (again, after ``stop``)."""
        if self._platform is None:
            stack = contextlib.ExitStack()
            # The tests' Redis db (15, or one per xdist worker) is theirs alone: flushed of
            # the queues of earlier runs.
            self._platform = stack.enter_context(
                launched_platform(
                    settings.SERVICES,
                    self._tmp_path_factory.mktemp("e2e"),
                    database=f"npulab_e2e_{os.getpid()}",
                    flush_redis=True,
                    settings=TELEMETRY,
                )
            )
            self._stack = stack
        return self._platform

    def stop(self) -> None:
        if self._stack is not None:
            self._stack.close()
        self._stack = self._platform = None


# The files that hold an end-to-end test (tests/conftest.py runs them first).
E2E_FILES = pytest.StashKey[set[str]]()


def file_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def stop_after_the_last_e2e_test(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the shared stack when the next test's file holds no end-to-end test (the
    session's end stops it anyway). By file, not by test: a file of both kinds (the
    reliability tests') would stop it between its tests, and the next file launch it again."""
    shared = item.config.stash.get(SHARED_PLATFORM, None)
    if shared is None or nextitem is None:
        return
    if file_of(nextitem) not in item.config.stash.get(E2E_FILES, set()):
        shared.stop()
