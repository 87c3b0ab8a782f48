"""A driver's stop on SIGTERM and SIGINT: the running batch ends, then the driver stops (a
pod's termination, or Ctrl-C of `rillet run`)."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

log = logging.getLogger(__name__)


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Set `stop` on SIGTERM and SIGINT while inside (main thread only)."""

    def handle(signum: int, frame: FrameType | None) -> None:
        log.info(
            "received %s: stopping at the end of the running batch", signal.Signals(signum).name
        )
        stop.set()

    previous = {s: signal.signal(s, handle) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
