"""Committing the App's processed offsets to its Kafka consumer group, after each batch.

Structured Streaming keeps its offsets in the checkpoint and never commits to Kafka, so
kafka-consumer-groups, KEDA and Burrow would see no progress. The driver therefore commits, after
every finished batch, the offsets the batch processed to the group `rillet.<namespace>.<app>`,
with a consumer that never subscribes (so it never joins the group or takes partitions): the
group stays Empty, and its committed offsets and lag are what lag tools read. The checkpoint
stays the truth for recovery; the group is its shadow.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping

from confluent_kafka import Consumer, TopicPartition

from rillet.reconcile import apprun
from rillet.runtime import progress

log = logging.getLogger(__name__)


class OffsetCommitter:
    """Commits, per input partition, the offset every query reading it has processed."""

    def __init__(self, spec: apprun.RunSpec, *, queries: Iterable[str]) -> None:
        self.group = spec.consumer_group
        self._readers = progress.initial_readers(
            topics=sorted({i.topic for i in spec.stream_inputs}), queries=queries
        )
        self._reported: dict[str, dict[progress.TopicPartition, int]] = {}
        self._committed: dict[progress.TopicPartition, int] = {}
        self._lock = threading.Lock()
        self._consumer = Consumer(
            {
                **spec.kafka_config,
                "bootstrap.servers": spec.bootstrap_servers,
                "group.id": spec.consumer_group,
                "enable.auto.commit": False,
                "client.id": f"{spec.consumer_group}.committer",
            }
        )

    def on_batch(self, batch: progress.BatchProgress) -> dict[progress.TopicPartition, int]:
        """Record a finished batch and commit what it advanced; returns the offsets committed."""
        if not batch.partitions:
            return {}
        with self._lock:
            self._readers = progress.narrow_readers(self._readers, batch)
            self._reported.setdefault(batch.query, {}).update(batch.end_offsets)
            plan = progress.plan_commit(
                readers=self._readers, reported=self._reported, committed=self._committed
            )
            if plan:
                self._commit(plan)
                self._committed.update(plan)
            return plan

    def _commit(self, plan: Mapping[progress.TopicPartition, int]) -> None:
        offsets = [
            TopicPartition(topic, partition, offset)
            for (topic, partition), offset in sorted(plan.items())
        ]
        # Synchronous: when this returns, lag tools see the batch. A failure propagates to the
        # listener, which logs it; the next batch commits again.
        self._consumer.commit(offsets=offsets, asynchronous=False)

    @property
    def committed(self) -> dict[progress.TopicPartition, int]:
        """What this committer has committed so far."""
        with self._lock:
            return dict(self._committed)

    def close(self) -> None:
        """Leave Kafka (nothing to revoke: the consumer never subscribed)."""
        self._consumer.close()
