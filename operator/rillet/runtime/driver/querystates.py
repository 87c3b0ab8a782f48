"""Where a running streaming query stands, as the driver waits on it: reading, at a batch
boundary, its last batch."""

from __future__ import annotations

from pyspark.sql.streaming.query import StreamingQuery


def reading(query: StreamingQuery) -> bool:
    """Whether `query` has fixed its start offsets: it planned a batch (data available) or
    reported a trigger (progress), or it ended."""
    status = query.status
    return bool(not query.isActive or query.lastProgress is not None or status["isDataAvailable"])


def at_boundary(query: StreamingQuery, last_written: int | None) -> bool:
    """Gated: the last written batch is committed. Not gated (real-time mode, whose one long
    batch never ends on its own): at once, the epoch being written runs again on restart."""
    if last_written is None:
        return True
    return last_batch(query) >= last_written


def last_batch(query: StreamingQuery) -> int:
    last = query.lastProgress
    return -1 if last is None else int(last.batchId)
