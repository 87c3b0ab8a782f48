"""Where a running streaming query stands, as the driver waits on it: reading, at a batch
boundary, its last batch, ended or failed."""

from __future__ import annotations

from collections.abc import Sequence

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


def first_failure(queries: Sequence[StreamingQuery], *, ignored: str) -> str | None:
    """The error of the first ended query that failed, unless its message holds `ignored`."""
    for query in queries:
        error = None if query.isActive else query.exception()
        if error is not None and ignored not in str(error):
            return f"query {query.name} failed: {error}"
    return None


def outcome(queries: Sequence[StreamingQuery], *, ignored: str) -> tuple[bool, str | None]:
    """Whether every query has ended, and the first failure (as `first_failure`).

    Read in that order: a query that fails between the two reads is then seen failed. Read the
    other way round it would pass for one that ended cleanly, and a failed App's driver would
    exit 0, its error lost.
    """
    ended = not any(query.isActive for query in queries)
    return ended, first_failure(queries, ignored=ignored)
