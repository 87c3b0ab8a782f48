"""Independent reads of Kafka (AdminClient), to check what the operator did there."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from .polling import wait_for


def kafka_partitions(admin: AdminClient, name: str) -> int | None:
    topics = admin.list_topics(timeout=10).topics
    return len(topics[name].partitions) if name in topics else None


def kafka_overrides(admin: AdminClient, name: str) -> dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, name)
    entries = admin.describe_configs([resource])[resource].result(timeout=10)
    return {
        key: entry.value
        for key, entry in entries.items()
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }


def kafka_topic_id(admin: AdminClient, name: str) -> str | None:
    """Kafka's id of the topic (as the AdminClient prints it), None if there is no such topic."""
    future = admin.describe_topics(TopicCollection([name]), request_timeout=10)[name]
    try:
        return str(future.result(timeout=15).topic_id)
    except KafkaException as error:
        if error.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        raise


def kafka_replication_factors(admin: AdminClient, name: str) -> set[int]:
    """The number of replicas of each partition (from the cluster metadata), as a set."""
    topic = admin.list_topics(timeout=10).topics[name]
    return {len(partition.replicas) for partition in topic.partitions.values()}


def wait_kafka_topic_gone(admin: AdminClient, name: str, *, timeout: float = 60) -> None:
    """Wait until Kafka no longer lists topic `name` (an operator deleting it)."""
    wait_for(
        lambda: name not in admin.list_topics(timeout=10).topics,
        timeout=timeout,
        what=f"the operator to delete Kafka topic {name}",
    )
