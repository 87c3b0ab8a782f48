"""What the driver tells the operator about itself: the `rillet.io/progress` pod annotation.

The driver pod carries one annotation, rewritten every few seconds by the in-cluster loop
(`incluster`), whose value is compact JSON:

    {"executors": 3, "lastBatchTime": "2025-01-02T03:04:05Z", "rowsPerSecond": 1520.5,
     "batches": 812, "applicationId": "spark-5f0c..."}

- executors: executors registered with the driver now;
- lastBatchTime: when the App's latest micro-batch was reported finished (UTC, RFC 3339;
  null before the first one);
- rowsPerSecond: records per second the App reads from Kafka, by Spark's last batch of each
  query: per input topic the fastest query reading it (an input read by an output and by its
  dead-letter query counts once), summed over topics; a query without a batch for
  `FRESH_SECONDS` counts 0 (Spark reports no progress while a query is idle);
- batches: micro-batches finished by all of the App's queries since the driver started;
- applicationId: Spark's application id (changes when the driver restarts);
- statePartitions: the most state partitions a stateful query of the App runs (Spark's
  numShufflePartitions of its state operators, frozen in its checkpoint at the first start),
  once such a query reported a batch; absent for a stateless App.

`BatchTally` is fed by the progress listener (a batch handler) and read by the loop; the rest
is purely computational.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from rillet.runtime import progress

PROGRESS_ANNOTATION = "rillet.io/progress"
FRESH_SECONDS = 60.0

Clock = Callable[[], datetime.datetime]


def utc_now() -> datetime.datetime:
    """Now, in UTC."""
    return datetime.datetime.now(datetime.UTC)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProgressReport:
    """The value of the progress annotation."""

    executors: int
    last_batch_time: datetime.datetime | None
    rows_per_second: float
    batches: int
    application_id: str
    # The state partitions of the App's stateful queries (frozen in their checkpoints): what
    # the stage after their shuffle runs at once, which the operator's executor cap counts.
    state_partitions: int | None = None

    def to_json(self) -> str:
        """The annotation's value: compact JSON, keys in a fixed order."""
        document: dict[str, Any] = {
            "executors": self.executors,
            "lastBatchTime": format_time(self.last_batch_time),
            "rowsPerSecond": round(self.rows_per_second, 1),
            "batches": self.batches,
            "applicationId": self.application_id,
        }
        if self.state_partitions is not None:
            document["statePartitions"] = self.state_partitions
        return json.dumps(document, separators=(",", ":"))


def format_time(moment: datetime.datetime | None) -> str | None:
    """RFC 3339 in UTC to the second, as Kubernetes writes times (None stays None)."""
    if moment is None:
        return None
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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


def build_annotation_patch(report: ProgressReport) -> dict[str, Any]:
    """The merge patch of the driver pod that sets the progress annotation."""
    return {"metadata": {"annotations": {PROGRESS_ANNOTATION: report.to_json()}}}


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

    def report(self, *, executors: int, application_id: str) -> ProgressReport:
        """The progress as of now."""
        now = self._clock()
        with self._lock:
            rate = total_rate(self._rates, now=now, fresh_seconds=self._fresh_seconds)
            return ProgressReport(
                executors=executors,
                last_batch_time=self._last,
                rows_per_second=rate,
                batches=self._batches,
                application_id=application_id,
                state_partitions=max(self._state_partitions.values(), default=None),
            )
