"""Independent reads of Kafka (AdminClient), to check what the operator did there."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType


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
