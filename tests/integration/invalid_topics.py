"""Table data: invalid Topics (types, ranges, Kafka topic names, config, updates), and what the
apiserver says when it refuses them. Part of the table invalid_crs.py joins.
"""

from __future__ import annotations

from tests.integration.invalid_cases import DROP, Case, merged, topic

CASES: tuple[Case, ...] = (
    # --- Topic: types, ranges, required fields
    Case("topic-partitions-string", topic({"partitions": "three"}), "spec.partitions"),
    Case(
        "topic-partitions-zero",
        topic({"partitions": 0}),
        "spec.partitions in body should be greater than or equal to 1",
    ),
    Case(
        "topic-partitions-negative",
        topic({"partitions": -4}),
        "spec.partitions in body should be greater than or equal to 1",
    ),
    Case(
        "topic-partitions-missing", topic({"partitions": DROP}), "spec.partitions: Required value"
    ),
    Case("topic-spec-missing", merged(topic(), {"spec": DROP}), "spec: Required value"),
    Case(
        "topic-replication-factor-zero",
        topic({"replicationFactor": 0}),
        "spec.replicationFactor in body should be greater than or equal to 1",
    ),
    Case(
        "topic-replication-factor-huge",
        topic({"replicationFactor": 40000}),
        "spec.replicationFactor in body should be less than or equal to 32767",
    ),
    Case(
        "topic-partitions-past-int32",
        topic({"partitions": 2**31}),
        "spec.partitions in body should be less than or equal to 2147483647",
    ),
    Case(
        "topic-partitions-past-int64",
        topic({"partitions": 2**63}),
        "spec.partitions",
    ),
    Case(
        "topic-deletion-policy-enum",
        topic({"deletionPolicy": "Orphan"}),
        'spec.deletionPolicy: Unsupported value: "Orphan"',
    ),
    # --- Topic: Kafka topic names
    Case("topic-name-dot", topic({"topicName": "."}), "cannot be '.' or '..'"),
    Case("topic-name-dot-dot", topic({"topicName": ".."}), "cannot be '.' or '..'"),
    Case(
        "topic-name-internal", topic({"topicName": "__consumer_offsets"}), "cannot start with '_'"
    ),
    Case("topic-name-internal-schemas", topic({"topicName": "_schemas"}), "cannot start with '_'"),
    Case("topic-name-space", topic({"topicName": "a b"}), "spec.topicName in body should match"),
    Case("topic-name-unicode", topic({"topicName": "ü"}), "spec.topicName in body should match"),
    Case("topic-name-empty", topic({"topicName": ""}), "spec.topicName"),
    Case("topic-name-too-long", topic({"topicName": "t" * 250}), "spec.topicName: Too long"),
    Case(
        "topic-default-name-too-long",
        merged(topic(), {"metadata": {"name": ".".join(["n" * 62] * 4)[:250]}}),
        "too long for a Kafka topic name: set spec.topicName",
    ),
    # --- Topic: unknown fields
    Case("topic-unknown-spec-field", topic({"partition": 3}), "spec.partition"),
    Case("topic-unknown-top-level-field", merged(topic(), {"specification": {}}), "specification"),
    # --- Topic: config
    Case(
        "topic-config-unknown-key",
        topic({"config": {"log.retention.ms": 1000}}),
        "config key log.retention.ms is not a Kafka topic config",
    ),
    Case(
        "topic-config-two-unknown-keys",
        topic({"config": {"retention.ms": 1, "retention.hours": 1, "segment.size": 1}}),
        "is not a Kafka topic config",
    ),
    Case(
        "topic-config-bool-value",
        topic({"config": {"preallocate": True}}),
        "spec.config.preallocate",
    ),
    Case(
        "topic-config-float-value",
        topic({"config": {"min.cleanable.dirty.ratio": 0.5}}),
        "spec.config.min.cleanable.dirty.ratio",
    ),
    Case(
        "topic-config-object-value",
        topic({"config": {"retention.ms": {"days": 7}}}),
        "spec.config.retention.ms",
    ),
    Case(
        "topic-config-int-for-boolean",
        topic({"config": {"preallocate": 1}}),
        'config preallocate needs the string "true" or "false"',
    ),
    Case(
        "topic-config-words-for-integer",
        topic({"config": {"retention.ms": "7 days"}}),
        "config retention.ms needs a whole number",
    ),
    Case(
        "topic-config-int-setting-past-int32",
        topic({"config": {"max.message.bytes": 2**31}}),
        "config max.message.bytes is a 32-bit integer in Kafka (INT)",
    ),
    Case(
        "topic-config-long-setting-past-int64",
        topic({"config": {"retention.ms": 2**63}}),
        "spec.config.retention.ms",
    ),
    Case(
        "topic-config-bad-choice",
        topic({"config": {"cleanup.policy": "remove"}}),
        "config cleanup.policy must be one of",
    ),
    Case(
        "topic-config-bad-compression",
        topic({"config": {"compression.type": "brotli"}}),
        "config compression.type must be one of",
    ),
    # --- Topic: updates
    Case(
        "topic-partitions-decreased",
        topic({"partitions": 2}),
        "partitions cannot decrease",
        before=topic({"partitions": 3}),
    ),
    Case(
        "topic-name-changed",
        topic({"topicName": "orders.v2"}),
        "topicName cannot change once set",
        before=topic({"topicName": "orders.v1"}),
    ),
    Case(
        "topic-name-added",
        topic({"topicName": "orders.v2"}),
        "topicName cannot be added or removed",
        before=topic(),
    ),
    Case(
        "topic-name-removed",
        topic(),
        "topicName cannot be added or removed",
        before=topic({"topicName": "orders.v1"}),
    ),
    Case(
        "topic-replication-factor-changed",
        topic({"replicationFactor": 3}),
        "replicationFactor cannot change once set",
        before=topic({"replicationFactor": 1}),
    ),
)
