"""The local Kafka is a real KRaft cluster.

Test plan:
- a topic created with the AdminClient is described back with its partitions.
- 10,000 keyed records produced come back, all of them, in order within each partition.
- on a three-broker cluster a replication-factor-3 topic has three in-sync replicas.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic, TopicMetadata

from .conftest import separate_kafka
from .polling import wait_for

RECORDS = 10_000


def test_admin_client_creates_topic(kafka_admin: AdminClient, topic_name: str) -> None:
    kafka_admin.create_topics([NewTopic(topic_name, num_partitions=6, replication_factor=1)])[
        topic_name
    ].result(timeout=30)

    def described() -> TopicMetadata | None:
        # The controller has the topic once the create returns; a broker's metadata follows it
        # a moment later, and answers UNKNOWN_TOPIC_OR_PART until then.
        found = kafka_admin.list_topics(topic=topic_name, timeout=10).topics[topic_name]
        return found if found.error is None else None

    topic = wait_for(described, timeout=30, what=f"{topic_name} in the broker's metadata")
    assert len(topic.partitions) == 6


def _consume_all(bootstrap: str, topic: str, expected: int) -> list[tuple[int, str, str]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    received: list[tuple[int, str, str]] = []
    try:
        empty_polls = 0
        while len(received) < expected and empty_polls < 60:
            batch = consumer.consume(num_messages=1000, timeout=1.0)
            empty_polls = 0 if batch else empty_polls + 1
            for message in batch:
                assert message.error() is None, message.error()
                partition, key, value = message.partition(), message.key(), message.value()
                assert partition is not None
                assert key is not None
                assert value is not None
                received.append((partition, key.decode(), value.decode()))
    finally:
        consumer.close()
    return received


def test_keyed_records_come_back_in_order_per_partition(
    kafka_admin: AdminClient, kafka_bootstrap: str, topic_name: str
) -> None:
    kafka_admin.create_topics([NewTopic(topic_name, num_partitions=4, replication_factor=1)])[
        topic_name
    ].result(timeout=30)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    for sequence in range(RECORDS):
        producer.produce(topic_name, key=f"key-{sequence % 50}", value=str(sequence))
        if sequence % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0

    received = _consume_all(kafka_bootstrap, topic_name, RECORDS)

    assert len(received) == RECORDS
    assert sorted(int(value) for _, _, value in received) == list(range(RECORDS))
    per_key: dict[str, list[int]] = defaultdict(list)
    partition_of_key: dict[str, set[int]] = defaultdict(set)
    for partition, key, value in received:
        per_key[key].append(int(value))
        partition_of_key[key].add(partition)
    assert all(len(partitions) == 1 for partitions in partition_of_key.values())
    assert all(values == sorted(values) for values in per_key.values())
    assert len({p for p, _, _ in received}) > 1


@pytest.fixture(scope="module")
def three_brokers(stack: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A separate three-node KRaft cluster, so the shared stack keeps its single broker."""
    with separate_kafka(tmp_path_factory.mktemp("kafka3"), brokers=3) as bootstrap:
        yield bootstrap


def test_replication_factor_three_has_three_in_sync_replicas(
    three_brokers: str, topic_name: str
) -> None:
    admin = AdminClient({"bootstrap.servers": three_brokers})
    admin.create_topics([NewTopic(topic_name, num_partitions=3, replication_factor=3)])[
        topic_name
    ].result(timeout=30)

    def partitions_fully_in_sync() -> dict[int, list[int]]:
        partitions = admin.list_topics(topic=topic_name, timeout=10).topics[topic_name].partitions
        isrs = {p.id: sorted(p.isrs) for p in partitions.values()}
        return isrs if len(isrs) == 3 and all(len(i) == 3 for i in isrs.values()) else {}

    # Metadata right after creation may still lag behind the controller: poll, bounded.
    isrs = wait_for(partitions_fully_in_sync, timeout=30, what="3 partitions with 3 ISRs")
    assert isrs == {0: [1, 2, 3], 1: [1, 2, 3], 2: [1, 2, 3]}
