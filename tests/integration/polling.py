"""Waiting for a condition in the real stack, with a deadline and a message that says what for
(`wait_for`); or only whether it came (`until`: for clean-up, which reports what is left itself).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

T = TypeVar("T")
# `pytest --log-cli-level=INFO` shows each wait and how long it took: where a test's time goes.
log = logging.getLogger(__name__)


def wait_for(
    probe: Callable[[], T | None], *, timeout: float = 60, interval: float = 0.2, what: str
) -> T:
    """Call `probe` until it returns a truthy value; return it, or fail naming `what`."""
    last: list[T | None] = []

    def attempt() -> T | None:
        value = probe()
        last[:] = [value]
        return value

    retrying = Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_fixed(interval),
        retry=retry_if_result(lambda value: not value),
        retry_error_callback=lambda _: None,
    )
    started = time.monotonic()
    value = retrying(attempt)
    log.info("waited %.1f s for %s", time.monotonic() - started, what)
    if not value:
        seen = last[0] if last else None
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; last seen: {seen!r}")
    return value


def until(probe: Callable[[], bool], *, timeout: float, interval: float = 1.0) -> bool:
    """Poll `probe` until it is true or `timeout` s passed; whether it became true."""
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True
