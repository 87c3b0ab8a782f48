"""The StreamingQueryListener that hands every finished batch to the runtime's handlers.

Spark calls it on its listener bus after a batch is committed to the checkpoint; it parses the
progress once and calls each handler (commit offsets, update metrics, wake waiting tests). A
failing handler is logged, never raised into Spark, and never keeps the other handlers from
running.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence

from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    StreamingQueryListener,
)

from rillet.runtime.batches import progress

log = logging.getLogger(__name__)

BatchHandler = Callable[[progress.BatchProgress], None]


def only(names: set[str], handler: BatchHandler) -> BatchHandler:
    """A handler that ignores batches of other Apps' queries in the same session."""

    def handle(batch: progress.BatchProgress) -> None:
        if batch.query in names:
            handler(batch)

    return handle


class ProgressListener(StreamingQueryListener):
    """Parses each progress event and passes it to the handlers, in order."""

    def __init__(self, handlers: Sequence[BatchHandler], *, expected: Sequence[str] = ()) -> None:
        self._handlers = list(handlers)
        # Texts of failures the driver acts on (a stop it asked for, an Avro schema id to
        # learn): logged as the one line that says so, not as an error with its stack.
        self._expected = tuple(expected)
        self._lock = threading.Lock()

    def onQueryStarted(self, event: QueryStartedEvent) -> None:  # noqa: N802 (Spark's name)
        log.info("query %s started (id %s)", event.name, event.id)

    def onQueryProgress(self, event: QueryProgressEvent) -> None:  # noqa: N802
        batch = progress.parse_progress(json.loads(event.progress.json))
        with self._lock:  # events of several queries may arrive on different threads
            for handler in self._handlers:
                try:
                    handler(batch)
                except Exception:
                    log.exception("handling batch %s of %s failed", batch.batch_id, batch.query)

    def onQueryIdle(self, event: QueryIdleEvent) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:  # noqa: N802
        if not event.exception:
            return
        lines = [
            line
            for line in event.exception.splitlines()
            if any(text in line for text in self._expected)
        ]
        if lines:
            log.info("query %s stopped: %s", event.id, lines[0].strip())
        else:
            log.error("query %s failed: %s", event.id, event.exception)
