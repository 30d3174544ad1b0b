"""Uploads one after another, in a thread that lives only while there is work."""

from __future__ import annotations

import threading

from tests.waiting import wait_until
from workers.host.serial import Serial


def threads_named(name: str) -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == name]


def test_items_are_handled_in_order_and_no_thread_is_left_once_done() -> None:
    handled: list[int] = []
    release = threading.Event()

    def handle(item: int) -> None:
        release.wait(30)
        if item == 2:
            raise ValueError("a bad item")
        handled.append(item)

    serial = Serial(handle, "serial-test")
    assert threads_named("serial-test") == []
    for item in range(5):
        serial.add(item)
    assert not serial.idle.is_set()
    assert len(threads_named("serial-test")) == 1
    release.set()
    assert serial.idle.wait(30)
    assert handled == [0, 1, 3, 4]
    wait_until(lambda: not threads_named("serial-test"), "the thread to end", 30)

    # Work after it went idle gets a thread again.
    serial.add(5)
    assert serial.idle.wait(30)
    assert handled[-1] == 5
    wait_until(lambda: not threads_named("serial-test"), "the thread to end", 30)
