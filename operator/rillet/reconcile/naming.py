"""How a Topic or Table object maps to a Kafka topic name."""

from __future__ import annotations

from rillet.api.v1alpha1 import fields


def kafka_topic_name(
    *, object_name: str, namespace: str, spec_topic_name: str | None, prefix_namespace: bool
) -> str:
    """spec.topicName, else metadata.name; prefixed `<namespace>.` when the operator is set to
    (clusters shared by teams)."""
    base = spec_topic_name or object_name
    return f"{namespace}.{base}" if prefix_namespace else base


def name_problem(name: str) -> str | None:
    """Why Kafka would refuse `name` (the prefixed form can outgrow the limit), or None."""
    if len(name) > fields.KAFKA_TOPIC_NAME_MAX_LENGTH:
        return (
            f"Kafka topic name {name[:40]}... is {len(name)} characters, more than Kafka's "
            f"{fields.KAFKA_TOPIC_NAME_MAX_LENGTH}: set a shorter spec.topicName"
        )
    return None
