"""Committing the App's processed offsets to its Kafka consumer group, after each batch.

Structured Streaming keeps its offsets in the checkpoint and never commits to Kafka, so
kafka-consumer-groups, KEDA and Burrow would see no progress. The driver therefore commits, after
every finished batch, the offsets the batch processed to the group `rillet.<namespace>.<app>`,
through the admin API (AlterConsumerGroupOffsets: an offset commit from no member, so nothing
ever joins the group or takes partitions): the group stays Empty, and its committed offsets and
lag are what lag tools read. The checkpoint stays the truth for recovery; the group is its
shadow.

Not a consumer's synchronous commit: that one has no timeout and can wait forever (reported in
confluent-kafka-python#1801), and it runs on Spark's listener thread, where a wait that never ends
stops every later progress event, and with them lag, metrics and progress, without a line in the
log. An admin request ends within its timeout. A commit Kafka answers with a coordinator or a
leader moving (a new group's first commit can meet NOT_COORDINATOR) is sent again for up to
watermarks.SETTLE_SECONDS: an App whose only batch went uncommitted would show its whole input as
lag. Any other failure is logged, and the next batch commits again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Final

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

from rillet.driverapi import runspecs
from rillet.runtime.batches import progress
from rillet.tables import watermarks

log = logging.getLogger(__name__)

COMMIT_TIMEOUT_SECONDS: Final = 30.0


class OffsetCommitter:
    """Commits, per input partition, the offset every query reading it has processed."""

    def __init__(self, spec: runspecs.RunSpec, *, queries: Iterable[str]) -> None:
        self.group = spec.consumer_group
        self._readers = progress.initial_readers(
            topics=sorted({i.topic for i in spec.stream_inputs}), queries=queries
        )
        self._reported: dict[str, dict[progress.TopicPartition, int]] = {}
        self._committed: dict[progress.TopicPartition, int] = {}
        self._lock = threading.Lock()
        self._admin: AdminClient | None = AdminClient(
            {
                **spec.kafka_config,
                "bootstrap.servers": spec.bootstrap_servers,
                "client.id": f"{spec.consumer_group}.committer",
            }
        )

    def on_batch(self, batch: progress.BatchProgress) -> dict[progress.TopicPartition, int]:
        """Record a finished batch and commit what it advanced; returns the offsets committed."""
        with self._lock:
            if not batch.partitions or self._admin is None:
                return {}
            self._readers = progress.narrow_readers(self._readers, batch)
            self._reported.setdefault(batch.query, {}).update(batch.end_offsets)
            plan = progress.plan_commit(
                readers=self._readers, reported=self._reported, committed=self._committed
            )
            if plan:
                self._commit_settled(plan)
                self._committed.update(plan)
            return plan

    def _commit_settled(self, plan: Mapping[progress.TopicPartition, int]) -> None:
        retrying = Retrying(
            retry=retry_if_exception(watermarks.kafka_settling),
            stop=stop_after_delay(watermarks.SETTLE_SECONDS),
            wait=wait_exponential(multiplier=0.1, max=2),
            reraise=True,
        )
        retrying(self._commit, plan)

    def _commit(self, plan: Mapping[progress.TopicPartition, int]) -> None:
        offsets = [
            TopicPartition(topic, partition, offset)
            for (topic, partition), offset in sorted(plan.items())
        ]
        # When this returns, lag tools see the batch. A failure propagates to the listener,
        # which logs it; the next batch commits again.
        request = ConsumerGroupTopicPartitions(self.group, offsets)
        assert self._admin is not None, "a closed committer commits nothing (on_batch)"
        [done] = self._admin.alter_consumer_group_offsets(
            [request], request_timeout=COMMIT_TIMEOUT_SECONDS
        ).values()
        # The request's own timeout ends it; this one only guards against a lost answer.
        result = done.result(timeout=COMMIT_TIMEOUT_SECONDS * 2)
        failed = [tp for tp in result.topic_partitions or [] if tp.error is not None]
        if failed:
            raise KafkaException(failed[0].error)

    def close(self) -> None:
        """Let go of the Kafka client: the driver has stopped for good, and a batch reported
        later commits nothing. Dropped, not closed (confluent-kafka's AdminClient has no
        close(): its last reference going destroys it), and dropped here because py4j keeps a
        listener removed from the session, and with it this committer: a client left behind
        would reconnect to its brokers for as long as the process lives."""
        with self._lock:
            self._admin = None

    @property
    def committed(self) -> dict[progress.TopicPartition, int]:
        """What this committer has committed so far."""
        with self._lock:
            return dict(self._committed)
