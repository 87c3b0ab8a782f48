"""The driver's side of the `rillet.io/progress` pod annotation: what goes into it.

The annotation itself (its model, JSON and patch) is the contract's: `driverapi.reports`. Here
the driver counts its batches and rates for it: `BatchTally` is fed by the progress listener (a
batch handler) and read by the in-cluster loop (`incluster`), which writes the annotation.

- rowsPerSecond: records per second the App reads from Kafka, by Spark's last batch of each
  query: per input topic the fastest query reading it (an input read by an output and by its
  dead-letter query counts once), summed over topics; a query without a batch for
  `FRESH_SECONDS` counts 0 (Spark reports no progress while a query is idle);
- statePartitions: the most state partitions a stateful query of the App runs, once such a
  query reported a batch.

Apart from `BatchTally`'s lock, purely computational.
"""

from __future__ import annotations

import dataclasses
import datetime
import threading
from collections.abc import Callable, Mapping

from rillet.driverapi import reports
from rillet.runtime.batches import progress

FRESH_SECONDS = 60.0

Clock = Callable[[], datetime.datetime]


def utc_now() -> datetime.datetime:
    """Now, in UTC."""
    return datetime.datetime.now(datetime.UTC)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SourceRate:
    """The rate of one source of one query, as of its last batch."""

    rate: float
    at: datetime.datetime


def total_rate(
    rates: Mapping[tuple[str, str], SourceRate], *, now: datetime.datetime, fresh_seconds: float
) -> float:
    """Records/s read: per topic (key[1]) the fastest fresh query (key[0]), summed over topics."""
    fastest: dict[str, float] = {}
    for (_query, topics), entry in rates.items():
        if (now - entry.at).total_seconds() <= fresh_seconds:
            fastest[topics] = max(fastest.get(topics, 0.0), entry.rate)
    return float(sum(fastest.values()))


class BatchTally:
    """Counts the App's finished batches and keeps their rates (thread-safe)."""

    def __init__(self, *, clock: Clock = utc_now, fresh_seconds: float = FRESH_SECONDS) -> None:
        self._clock = clock
        self._fresh_seconds = fresh_seconds
        self._lock = threading.Lock()
        self._batches = 0
        self._last: datetime.datetime | None = None
        self._rates: dict[tuple[str, str], SourceRate] = {}
        self._state_partitions: dict[str, int] = {}

    def on_batch(self, batch: progress.BatchProgress) -> None:
        """A batch handler for the progress listener."""
        now = self._clock()
        with self._lock:
            self._batches += 1
            self._last = now
            for topics, rate in batch.source_rates.items():
                self._rates[(batch.query, topics)] = SourceRate(rate=rate, at=now)
            if batch.state_partitions:
                self._state_partitions[batch.query] = batch.state_partitions

    def report(self, *, executors: int, application_id: str) -> reports.Progress:
        """The progress as of now."""
        now = self._clock()
        with self._lock:
            rate = total_rate(self._rates, now=now, fresh_seconds=self._fresh_seconds)
            return reports.Progress(
                executors=executors,
                last_batch_time=self._last,
                rows_per_second=rate,
                batches=self._batches,
                application_id=application_id,
                state_partitions=max(self._state_partitions.values(), default=None),
            )
