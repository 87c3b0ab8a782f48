"""Drift made in Kafka is corrected, and a change Kafka cannot make stalls the Topic alone.

Test plan (each claim checked in Kafka with an independent AdminClient read):
- drift in Kafka (config, partitions, deleted topic) is corrected within one resync, with Events;
  a deleted topic comes back with a new id in Kafka, which the status reports.
- partitions above spec and a replication-factor change give Stalled with the right reason
  while a config change in the same update still reaches Kafka (whose replication factor stays).
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, ResourceType

from .conftest import Kube, Unique
from .kafka_reads import (
    kafka_overrides,
    kafka_partitions,
    kafka_replication_factors,
    kafka_topic_id,
)
from .objects import (
    apply,
    condition,
    events,
    get,
    topic,
    wait_condition,
)
from .polling import wait_for

pytestmark = pytest.mark.usefixtures("operator")


def test_config_drift_in_kafka_is_reverted_within_a_resync(
    kube: Kube, namespace: str, kafka_admin: AdminClient, unique: Unique
) -> None:
    name = unique("drift")
    apply(kube, topic(name, namespace, config={"retention.ms": 600_000}))
    wait_condition(kube, "topic", name, namespace)

    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    resource = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    kafka_admin.incremental_alter_configs([resource])[resource].result(timeout=10)

    wait_for(
        lambda: kafka_overrides(kafka_admin, name) == {"retention.ms": "600000"},
        timeout=15,
        what="drift reverted by a resync",
    )
    # The Event is posted after the correction, and may show a moment later.
    wait_for(
        lambda: "DriftCorrected" in {e["reason"] for e in events(kube, namespace, name)},
        timeout=15,
        what="a DriftCorrected Event",
    )


def test_topic_deleted_out_of_band_is_recreated(
    kube: Kube, namespace: str, kafka_admin: AdminClient, unique: Unique
) -> None:
    name = unique("gone")
    apply(kube, topic(name, namespace, partitions=2))
    wait_condition(kube, "topic", name, namespace)
    first_id = kafka_topic_id(kafka_admin, name)
    assert first_id is not None

    kafka_admin.delete_topics([name])[name].result(timeout=30)

    def recreated() -> str | None:
        new_id = kafka_topic_id(kafka_admin, name)
        fresh = new_id is not None and new_id != first_id
        return new_id if fresh and kafka_partitions(kafka_admin, name) == 2 else None

    new_id = wait_for(recreated, timeout=20, what="the topic recreated in Kafka with a new id")
    wait_for(
        lambda: get(kube, "topic", name, namespace)["status"].get("topicId") == new_id,
        timeout=20,
        what="the status to report the new topic id",
    )


def test_partitions_above_spec_stall_while_config_still_applies(
    kube: Kube, namespace: str, kafka_admin: AdminClient, unique: Unique
) -> None:
    name = unique("shrink")
    apply(kube, topic(name, namespace, partitions=2, config={"retention.ms": 600_000}))
    wait_condition(kube, "topic", name, namespace)
    kafka_admin.create_partitions([NewPartitions(name, 5)])[name].result(timeout=30)

    kube.kubectl(
        "patch",
        "topic",
        name,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec": {"config": {"retention.ms": 900000}}}',
    )
    obj = wait_condition(
        kube,
        "topic",
        name,
        namespace,
        condition_type="Stalled",
        reason="PartitionDecreaseNotSupported",
    )

    assert "has 5 partitions but spec.partitions is 2" in condition(obj, "Stalled")["message"]
    assert condition(obj, "Ready")["status"] == "False"
    assert kafka_overrides(kafka_admin, name) == {"retention.ms": "900000"}
    assert kafka_partitions(kafka_admin, name) == 5
    warnings = [e for e in events(kube, namespace, name) if e["type"] == "Warning"]
    assert "PartitionDecreaseNotSupported" in {e["reason"] for e in warnings}


def test_replication_factor_change_stalls_while_config_still_applies(
    kube: Kube, namespace: str, kafka_admin: AdminClient, unique: Unique
) -> None:
    name = unique("rf")
    apply(kube, topic(name, namespace, config={"retention.ms": 600_000}))
    wait_condition(kube, "topic", name, namespace)

    kube.kubectl(
        "patch",
        "topic",
        name,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec": {"replicationFactor": 2, "config": {"retention.ms": 700000}}}',
    )
    obj = wait_condition(
        kube,
        "topic",
        name,
        namespace,
        condition_type="Stalled",
        reason="ReplicationFactorChangeNotSupported",
    )

    assert "spec.replicationFactor is 2" in condition(obj, "Stalled")["message"]
    assert kafka_overrides(kafka_admin, name) == {"retention.ms": "700000"}
    assert kafka_replication_factors(kafka_admin, name) == {1}
