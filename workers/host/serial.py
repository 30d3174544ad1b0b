"""Items handled one after another, in a thread that lives only while there is work.

The host worker uploads each run attempt's artifacts and checkpoints in order, beside the
run. A thread per uploader that waited on its queue for ever stayed for the worker's
life: one idle thread per attempt the worker had run. This one starts with the first item
and ends with the last. Standard library only, Python 3.8.
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Any, Callable

log = logging.getLogger(__name__)


class Serial:
    """``handle`` called for each added item in turn; ``idle`` is set while none waits."""

    def __init__(self, handle: Callable[[Any], None], name: str) -> None:
        self._handle = handle
        self._name = name
        self._items: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._working = False
        self.idle = threading.Event()
        self.idle.set()

    def wait_idle(self, give_up: threading.Event) -> bool:
        """Wait until no item waits; False if ``give_up`` came first."""
        while not self.idle.wait(0.5):
            if give_up.is_set():
                return False
        return True

    def add(self, item: Any) -> None:
        with self._lock:
            self._items.append(item)
            self.idle.clear()
            if self._working:
                return
            self._working = True
        threading.Thread(target=self._work, name=self._name, daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._items:
                    self._working = False
                    self.idle.set()
                    return
                item = self._items.popleft()
            try:
                self._handle(item)
            except Exception:  # one bad item must not stop the ones after it
                log.exception("%s: an item failed", self._name)
