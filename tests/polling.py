"""Waiting on a condition with a deadline, the tests' one way to synchronise with another thread or
process (never a fixed sleep: a loaded machine is slow, an idle one should not wait)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest


def poll_until(condition: Callable[[], object], timeout_s: float, what: str) -> None:
    """Poll ``condition`` until it holds; fail the test after ``timeout_s`` saying ``what`` it waited for."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.02)


def set_when(
    condition: Callable[[], object], event: threading.Event, timeout_s: float = 30
) -> threading.Thread:
    """Set ``event`` from a background thread as soon as ``condition`` holds (or after ``timeout_s``:
    the test then fails on its own assertions rather than hanging)."""

    def watch() -> None:
        deadline = time.monotonic() + timeout_s
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.02)
        event.set()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread
