"""Pins: the Table offsets up to which each batch of a query reads its lookups, kept in Kafka.

Without pins a lookup reads its Table up to wherever the topic ends when the task runs. A batch
run again after a failure would then join newer Table values than the first time: at-least-once
outputs would write other records than those already sent, and exactly-once outputs, whose write
units are a hash of each record (transactions.py), could skip a unit that now holds a record the
first run put in another unit, and lose it.

So before each batch writes, the driver pins the Tables: their end offsets, committed to the
group `<app group>.<query>.lookups` with the query's id and the batch id as the commit's
metadata. A batch that finds its own there is a replay and reads up to the same offsets; any
other batch pins anew. (The query's id is Spark's, kept in the checkpoint: an App started over
from an empty checkpoint counts batches from 0 again, and must not take old pins for its own.) Spark
replays only a query's last batch, so one commit per query is all the history needed. The pins
reach the tasks as a local property of the batch's jobs (`PINS_PROPERTY`), and each query keeps
replicas of its own (lookups.py): a query's pins only grow.

A group's coordinator answers "loading" while it reads its partition of `__consumer_offsets`
(a new group, a coordinator moved to another broker), and a leader may be moving: a pin asks
again for up to SETTLE_SECONDS rather than failing the batch and with it the query.

What a pin cannot bring back: a record compaction removed from the Table's topic between the
first run and the replay (a key's older value, once a newer one follows it). The Table's
`min.compaction.lag.ms` bounds that window (docs/tables.md).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Final

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

from rillet.tables import watermarks

log = logging.getLogger(__name__)

PINS_PROPERTY: Final = "rillet.lookups.pins"
# Spark's own local property of a micro-batch's thread: the query's id (StreamExecution).
QUERY_ID_PROPERTY: Final = "sql.streaming.queryId"
TIMEOUT_SECONDS: Final = 30.0
SETTLE_SECONDS: Final = 30.0

Pins = dict[str, dict[int, int]]  # topic -> partition -> offset to read up to (exclusive)


class LookupPins:
    """The pins of one query's batches, for the Tables its App looks up."""

    def __init__(self, *, config: Mapping[str, str], group: str, topics: Iterable[str]) -> None:
        self.group = group
        self.topics = sorted(set(topics))
        self._admin = AdminClient({**config, "client.id": f"{group}.pins"})

    def pin(self, query_id: str, batch_id: int) -> Pins:
        """The offsets batch `batch_id` of the query reads its Tables up to: those pinned for it
        before (a replay), else the Tables' end offsets now, committed first. Asked again while
        Kafka is settling (kafka_settling), for up to SETTLE_SECONDS."""
        retrying = Retrying(
            retry=retry_if_exception(watermarks.kafka_settling),
            stop=stop_after_delay(SETTLE_SECONDS),
            wait=wait_exponential(multiplier=0.1, max=2),
            reraise=True,
        )
        return retrying(self._pin, query_id, batch_id)

    def _pin(self, query_id: str, batch_id: int) -> Pins:
        partitions = self._partitions()
        batch = f"{query_id}:{batch_id}"
        pinned = self._committed(partitions, batch)
        if pinned is not None:
            log.info("batch %d is a replay: lookups read the Tables as its first run did", batch_id)
            return pinned
        ends = self._ends(partitions)
        self._commit(ends, batch)
        return ends

    def _partitions(self) -> list[TopicPartition]:
        found = []
        for topic in self.topics:  # each on its own: a cluster may hold thousands of topics
            metadata = self._admin.list_topics(topic, timeout=TIMEOUT_SECONDS)
            described = metadata.topics.get(topic)
            if described is None or described.error is not None:
                raise KafkaException(f"Table topic {topic} is not there to look up")
            found += [TopicPartition(topic, p) for p in sorted(described.partitions)]
        return found

    def _committed(self, partitions: list[TopicPartition], batch: str) -> Pins | None:
        request = ConsumerGroupTopicPartitions(self.group, partitions)
        [future] = self._admin.list_consumer_group_offsets(
            [request], request_timeout=TIMEOUT_SECONDS
        ).values()
        found = [tp for tp in future.result().topic_partitions if tp.offset >= 0]
        mine = [tp for tp in found if tp.metadata == batch]
        if not mine:
            return None
        pins: Pins = {}
        for tp in mine:
            pins.setdefault(tp.topic, {})[tp.partition] = tp.offset
        return pins

    def _ends(self, partitions: list[TopicPartition]) -> Pins:
        futures = self._admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in partitions},  # type: ignore[no-untyped-call]
            request_timeout=TIMEOUT_SECONDS,
        )
        pins: Pins = {}
        for tp, future in futures.items():
            pins.setdefault(tp.topic, {})[tp.partition] = future.result().offset
        return pins

    def _commit(self, pins: Pins, batch: str) -> None:
        offsets = [
            TopicPartition(topic, partition, offset, metadata=batch)
            for topic, ends in sorted(pins.items())
            for partition, offset in sorted(ends.items())
        ]
        request = ConsumerGroupTopicPartitions(self.group, offsets)
        [future] = self._admin.alter_consumer_group_offsets(
            [request], request_timeout=TIMEOUT_SECONDS
        ).values()
        failed = [tp for tp in future.result().topic_partitions if tp.error is not None]
        if failed:
            raise KafkaException(failed[0].error)  # the KafkaError: kafka_settling reads it


def encode(scope: str, pins: Pins) -> str:
    """The local property tasks read: whose pins (the query's name) and the offsets."""
    return json.dumps({"scope": scope, "pins": pins})


def decode(text: str | None) -> tuple[str, Pins] | None:
    """(scope, pins) of a task's local property; None outside a pinned batch."""
    if not text:
        return None
    found = json.loads(text)
    pins = {t: {int(p): int(o) for p, o in ends.items()} for t, ends in found["pins"].items()}
    return str(found["scope"]), pins
