"""The runtime tests' Kafka I/O: topics made, records produced, and what a topic, its headers,
its end offsets and a consumer group's commits hold (read back to judge an App's output).
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tenacity import retry, retry_if_exception, stop_after_delay, wait_fixed

from rillet.tables import tables, watermarks


def create_topics(admin: AdminClient, topics: Sequence[NewTopic]) -> None:
    for future in admin.create_topics(list(topics)).values():
        future.result(timeout=30)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[str | bytes | None, str | bytes | None]],
    *,
    partitions: int | None = None,
    timestamps: Iterable[int] | None = None,
) -> int:
    """Produce (key, value) records; round-robin over `partitions` when given. Returns the count."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    stamps = iter(timestamps) if timestamps is not None else None
    count = 0
    for index, (key, value) in enumerate(records):
        extra: dict[str, Any] = {}
        if partitions:
            extra["partition"] = index % partitions
        if stamps is not None:
            extra["timestamp"] = next(stamps)
        producer.produce(topic, key=key, value=value, **extra)
        count += 1
        if count % 10_000 == 0:
            producer.flush(30)
    assert producer.flush(30) == 0
    return count


def read_topic(bootstrap: str, topic: str) -> list[tables.Entry]:
    """Every record of a topic, up to its current end."""
    return tables.read_changelog(bootstrap_servers=bootstrap, topic=topic, timeout=60)


def headers_of(
    bootstrap: str, topic: str, *, timeout: float = 60
) -> list[tuple[bytes | None, dict[str, str]]]:
    """(value, headers) of every record of a topic (up to its end offsets when called)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test.{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: watermarks.watermarks(consumer, topic, p, timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        found: list[tuple[bytes | None, dict[str, str]]] = []
        deadline = time.monotonic() + timeout
        # Positions, not a count of records: a transaction's commit marker takes an offset too.
        filled = [TopicPartition(topic, p) for p in partitions if ends[p] > 0]
        while any(
            position.offset < ends[position.partition] for position in consumer.position(filled)
        ):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"read {len(found)} records of {topic}, not to its end {ends}, in {timeout}s"
                )
            for message in consumer.consume(num_messages=1000, timeout=5):
                assert message.error() is None, message.error()
                raw = message.headers() or []
                pairs = raw.items() if isinstance(raw, dict) else raw  # consumers get a list
                headers = {
                    key: value.decode() if isinstance(value, bytes) else value
                    for key, value in pairs
                    if value is not None
                }
                found.append((message.value(), headers))
        return found
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """High watermark of each partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"test.{uuid.uuid4().hex}"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: watermarks.watermarks(consumer, topic, p, timeout=10)[1] for p in partitions}
    finally:
        consumer.close()


def _coordinator_moving(error: BaseException) -> bool:
    """A group's coordinator loading or moving (a fresh cluster's first group): ask again."""
    if not isinstance(error, KafkaException) or not error.args:
        return False
    cause = error.args[0]  # a KafkaError, or a message for errors the client makes up
    return isinstance(cause, KafkaError) and cause.code() in {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    }


@retry(
    retry=retry_if_exception(_coordinator_moving),
    stop=stop_after_delay(30),
    wait=wait_fixed(0.2),
    reraise=True,
)
def _committed(consumer: Consumer, wanted: list[TopicPartition]) -> list[TopicPartition]:
    return consumer.committed(wanted, timeout=10)


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """Offsets the consumer group has committed on a topic (absent partitions left out)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = _committed(consumer, [TopicPartition(topic, p) for p in range(partitions)])
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}
    finally:
        consumer.close()


def copied_positions(bootstrap: str, topic: str) -> Counter[tuple[int, int]]:
    """How often each source record, by the (partition, offset) its copy is keyed by, is in
    `topic` (read_committed)."""
    keys = [json.loads(e.key or b"null") for e in read_topic(bootstrap, topic)]
    return Counter((k["partition"], k["offset"]) for k in keys)


def json_values(entries: Iterable[tables.Entry]) -> list[Any]:
    return [json.loads(e.value) for e in entries if e.value is not None]
