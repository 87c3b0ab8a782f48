"""What a finished micro-batch tells: offsets, lag, rates, and which offsets to commit (pure).

Spark reports each batch of each streaming query as a progress document (the JSON of
`StreamingQueryProgress`). Its Kafka sources carry `endOffset` (the next offset to read per
partition: what the batch processed) and `latestOffset` (the newest the broker had). This module
turns that into values for metrics and into the offsets the App's consumer group gets.

Several queries may read one topic (one per output, one for dead letters). The group holds, per
partition, the smallest offset all of them have processed, and only once each has reported: so
the group's lag never understates what is left to do. Until its first report, a query counts as
a reader of every input topic (which inputs a result depends on is only known from its sources).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any

TopicPartition = tuple[str, int]


@dataclasses.dataclass(frozen=True, kw_only=True)
class PartitionProgress:
    """Where one Kafka partition stands after a batch."""

    topic: str
    partition: int
    end_offset: int
    latest_offset: int | None

    @property
    def lag(self) -> int | None:
        """Records the broker had that the batch did not process."""
        return None if self.latest_offset is None else max(0, self.latest_offset - self.end_offset)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BatchProgress:
    """One finished micro-batch of one query."""

    query: str
    batch_id: int
    partitions: tuple[PartitionProgress, ...]
    input_rows: int
    input_rows_per_second: float
    processed_rows_per_second: float
    duration_seconds: float
    late_rows_dropped: int
    observed: Mapping[str, Mapping[str, Any]]
    source_rates: Mapping[str, float] = dataclasses.field(default_factory=dict)
    # The most partitions a state operator of the query runs (numShufflePartitions); None for
    # a stateless query.
    state_partitions: int | None = None

    @property
    def end_offsets(self) -> dict[TopicPartition, int]:
        """Processed offsets (next to read) by topic partition."""
        return {(p.topic, p.partition): p.end_offset for p in self.partitions}


def _offsets(value: Any) -> dict[str, dict[str, int]]:
    """A Kafka source offset ({topic: {partition: offset}}), given as JSON text or parsed."""
    if value is None:
        return {}
    parsed = json.loads(value) if isinstance(value, str) else value
    return parsed if isinstance(parsed, dict) else {}


def parse_partitions(source: Mapping[str, Any]) -> list[PartitionProgress]:
    """The partitions of one source of a progress document (non-Kafka sources give none)."""
    latest = _offsets(source.get("latestOffset"))
    return [
        PartitionProgress(
            topic=topic,
            partition=int(partition),
            end_offset=int(offset),
            latest_offset=_latest(latest, topic, partition),
        )
        for topic, partitions in _offsets(source.get("endOffset")).items()
        if isinstance(partitions, dict)
        for partition, offset in partitions.items()
    ]


def _latest(latest: Mapping[str, Any], topic: str, partition: str) -> int | None:
    value = latest.get(topic, {}).get(partition)
    return None if value is None else int(value)


def parse_progress(progress: Mapping[str, Any]) -> BatchProgress:
    """A progress document (StreamingQueryProgress.json, parsed) as a BatchProgress."""
    partitions = [p for s in progress.get("sources", []) for p in parse_partitions(s)]
    duration_ms = progress.get("durationMs", {}).get("triggerExecution", 0)
    return BatchProgress(
        query=str(progress.get("name") or progress.get("id")),
        batch_id=int(progress.get("batchId", -1)),
        partitions=tuple(partitions),
        input_rows=int(progress.get("numInputRows", 0)),
        input_rows_per_second=_rate(progress.get("inputRowsPerSecond")),
        processed_rows_per_second=_rate(progress.get("processedRowsPerSecond")),
        duration_seconds=float(duration_ms) / 1000,
        late_rows_dropped=sum(
            int(op.get("numRowsDroppedByWatermark", 0)) for op in progress.get("stateOperators", [])
        ),
        observed=progress.get("observedMetrics") or {},
        source_rates=source_rates(progress.get("sources", [])),
        state_partitions=state_partitions(progress.get("stateOperators", [])),
    )


def state_partitions(operators: Iterable[Mapping[str, Any]]) -> int | None:
    """The most partitions any state operator of a batch ran (None: no state operator)."""
    counts = [int(op.get("numShufflePartitions") or 0) for op in operators]
    return max(counts, default=0) or None


def source_rates(sources: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Records per second each Kafka source read, by its topics (comma-joined, sorted).

    Keyed by topic, so that an input several queries read (an output and its dead letters) can
    be counted once. Sources without Kafka offsets are left out.
    """
    rates: dict[str, float] = {}
    for source in sources:
        topics = ",".join(sorted(_offsets(source.get("endOffset"))))
        if topics:
            rates[topics] = rates.get(topics, 0.0) + _rate(source.get("inputRowsPerSecond"))
    return rates


def _rate(value: Any) -> float:
    """A rate from progress JSON; Spark writes NaN (or omits it) when a batch read nothing."""
    try:
        rate = float(value)
    except (TypeError, ValueError):
        return 0.0
    return rate if rate == rate else 0.0  # NaN != NaN


def plan_commit(
    *,
    readers: Mapping[str, frozenset[str]],
    reported: Mapping[str, Mapping[TopicPartition, int]],
    committed: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """Offsets to commit now: per partition, the least any reader of its topic processed.

    `readers` maps each topic to the queries reading it; `reported` holds each query's latest
    end offsets; `committed` what the group already has (only advances are returned).
    """
    plan: dict[TopicPartition, int] = {}
    for topic, queries in readers.items():
        if not queries or any(q not in reported for q in queries):
            continue
        partitions = {tp for q in queries for tp in reported[q] if tp[0] == topic}
        for tp in partitions:
            offsets = [reported[q].get(tp) for q in queries]
            if any(o is None for o in offsets):
                continue
            least = min(o for o in offsets if o is not None)
            if least > committed.get(tp, -1):
                plan[tp] = least
    return plan


def initial_readers(*, topics: Iterable[str], queries: Iterable[str]) -> dict[str, frozenset[str]]:
    """Before any report: every query may read every topic."""
    everyone = frozenset(queries)
    return {topic: everyone for topic in topics}


def narrow_readers(
    readers: Mapping[str, frozenset[str]], batch: BatchProgress
) -> dict[str, frozenset[str]]:
    """The readers once `batch` showed which topics its query reads."""
    read = {p.topic for p in batch.partitions}
    return {
        topic: queries if topic in read else queries - {batch.query}
        for topic, queries in readers.items()
    }
