"""The operator-wide loops are supervised: one that ends by itself stops the operator.

The topic syncer, the resync and the scaling loop run as asyncio tasks beside kopf's own. If one
of them ended with an exception, nothing else would notice: kopf keeps handling events, every
Topic handler then waits forever for a syncer that is gone, and the health endpoint still
answers. A zombie like that is worse than a crash, so a loop that ends (other than by
cancellation at shutdown) logs why and sets the stop flag the CLI gave kopf: the process exits
non-zero and its Deployment restarts it, as a Go controller's panic would.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

log = logging.getLogger(__name__)


class Supervisor:
    """Watches the operator's background tasks; `failure` names the first that ended."""

    def __init__(self, stop: asyncio.Event | None) -> None:
        self._stop = stop
        self.failure: str | None = None

    def watch(self, tasks: Iterable[asyncio.Task[None]]) -> None:
        for task in tasks:
            task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return  # shutdown
        error = task.exception()
        if error is not None:
            log.error("%s crashed; stopping the operator", task.get_name(), exc_info=error)
            self.failure = f"{task.get_name()} crashed: {error!r}"
        else:
            log.error("%s ended; stopping the operator", task.get_name())
            self.failure = f"{task.get_name()} ended"
        if self._stop is not None:
            self._stop.set()

    def release(self) -> None:
        """At a stop (SIGTERM): set the stop flag as well. kopf waits on it in a task of its
        own, which a signal does not end, and gives such tasks 5 s before cancelling them:
        every stop, and with it the Lease's release to a standby, took 5 s longer."""
        if self._stop is not None:
            self._stop.set()
