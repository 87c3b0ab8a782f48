"""The Topic kind: a Kafka topic whose partitions and configs are declared in Kubernetes.

The object is the source of truth: the operator creates the topic (or adopts an existing one of
the same name, when the object has the annotation rillet.io/adopt=true and no other Rillet
release claims the topic), grows its partitions, keeps its configs in line with `spec.config`
(all of them, or only the declared ones: `spec.configPolicy`), and writes only `status`.
Partitions only grow and the Kafka name never changes once set: the apiserver refuses such
updates.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from rillet.api.v1alpha1 import conditions, fields, objects, rules, topicconfigs

MAX_REPLICATION_FACTOR = 32767  # Kafka stores it as a 16-bit integer.

PARTITIONS_GROW_ONLY = rules.Rule(
    rule="self >= oldSelf",
    message="partitions cannot decrease: Kafka cannot remove partitions; set a value at least "
    "the current one, or create a new topic",
)
TOPIC_NAME_IMMUTABLE = rules.Rule(
    rule="self == oldSelf",
    message="topicName cannot change once set: create a new object for another Kafka topic",
)
TOPIC_NAME_FIXED_PRESENCE = rules.Rule(
    rule="has(self.topicName) == has(oldSelf.topicName)",
    message="topicName cannot be added or removed after creation (it would rename the Kafka "
    "topic): create a new object instead",
    field_path=".topicName",
)
REPLICATION_FACTOR_IMMUTABLE = rules.Rule(
    rule="self == oldSelf",
    message="replicationFactor cannot change once set: Kafka needs a partition reassignment, "
    "which Rillet does not do",
)


def default_name_fits(resource: objects.Resource, topic_name: str | None) -> bool:
    """Whether a topic without spec.topicName gets a valid Kafka name from metadata.name."""
    name = resource.metadata.name
    return topic_name is not None or name is None or len(name) <= fields.KAFKA_TOPIC_NAME_MAX_LENGTH


# A root rule of the kinds whose Kafka topic name defaults to metadata.name.
DEFAULT_NAME_FITS = rules.Rule(
    rule=f"has(self.spec.topicName) || self.metadata.name.size() <= "
    f"{fields.KAFKA_TOPIC_NAME_MAX_LENGTH}",
    message=f"metadata.name is longer than {fields.KAFKA_TOPIC_NAME_MAX_LENGTH} characters, too "
    f"long for a Kafka topic name: set spec.topicName",
    check=lambda resource: default_name_fits(resource, resource.spec.topic_name),
)


# Shared by the kinds that own a Kafka topic (Topic, Table).
PARTITIONS_COLUMN = objects.PrinterColumn(
    name="Partitions",
    type="integer",
    json_path=".status.partitions",
    description="Current number of partitions.",
)


class TopicSpec(objects.WireModel):
    """The Kafka topic the operator keeps in line with this object."""

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (TOPIC_NAME_FIXED_PRESENCE,)

    topic_name: Annotated[fields.KafkaTopicName, TOPIC_NAME_IMMUTABLE] | None = Field(
        default=None,
        description="Name of the topic in Kafka. Defaults to metadata.name. Cannot change, and "
        "cannot be added or removed, after creation.",
    )
    partitions: Annotated[fields.Partitions, PARTITIONS_GROW_ONLY] = Field(
        description="Number of partitions. Can grow, never shrink (Kafka cannot remove "
        "partitions; growing remaps keys to partitions).",
    )
    replication_factor: (
        Annotated[int, Field(ge=1, le=MAX_REPLICATION_FACTOR), REPLICATION_FACTOR_IMMUTABLE] | None
    ) = Field(
        default=None,
        description="Copies of each partition. Defaults to the broker's default.replication."
        "factor. Cannot change once set.",
    )
    config: topicconfigs.TopicConfig | None = Field(
        default=None,
        description=topicconfigs.CONFIG_DESCRIPTION,
    )
    deletion_policy: fields.DeletionPolicy = Field(
        default="Retain",
        description=fields.DELETION_POLICY_DESCRIPTION,
    )
    config_policy: fields.ConfigPolicy | None = Field(
        default=None,
        description=fields.CONFIG_POLICY_DESCRIPTION,
    )


class TopicStatus(conditions.Status):
    """The topic as last observed in Kafka."""

    topic_name: str | None = Field(default=None, description="Name of the topic in Kafka.")
    topic_id: str | None = Field(
        default=None,
        description="Kafka's id of the topic (a UUID, base64 as Kafka prints it); "
        "a new id means the topic was deleted and created again.",
    )
    partitions: fields.Count32 | None = Field(
        default=None, description="Current number of partitions."
    )
    replication_factor: Annotated[int, Field(ge=0, le=MAX_REPLICATION_FACTOR)] | None = Field(
        default=None, description="Current replication factor."
    )
    config: dict[str, str] | None = Field(
        default=None,
        description="The topic configs Kafka reports as set on the topic (not broker defaults).",
    )


class Topic(objects.Resource):
    """A Kafka topic managed by Rillet."""

    kind_info: ClassVar[objects.KindInfo] = objects.KindInfo(
        kind="Topic",
        plural="topics",
        singular="topic",
        short_names=("rt",),
        printer_columns=(
            objects.PrinterColumn(
                name="Kafka-Name",
                type="string",
                json_path=".status.topicName",
                description="Name of the topic in Kafka.",
            ),
            PARTITIONS_COLUMN,
            objects.PrinterColumn(
                name="Replicas",
                type="integer",
                json_path=".status.replicationFactor",
                description="Current replication factor.",
            ),
            objects.READY_COLUMN,
            objects.AGE_COLUMN,
        ),
    )
    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (DEFAULT_NAME_FITS,)

    kind: Literal["Topic"] = Field(default="Topic", description="The kind: Topic.")
    spec: TopicSpec = Field(description="The desired topic.")
    status: TopicStatus | None = Field(default=None, description="The observed topic.")
