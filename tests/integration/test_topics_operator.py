"""The operator keeps Kafka topics exactly as their Topic objects declare.

Test plan (each claim checked in Kafka with an independent AdminClient read):
- create: partitions, config and status (topicName, topicId, observedGeneration, Ready).
- adopt: an existing topic is brought in line; overrides not in spec are removed.
- grow partitions, change and remove config in one update.
- values equal by type (0 vs 0.0, 1000 vs "1000") never cause a change at resync.
- drift in Kafka (config, partitions, deleted topic) is corrected within one resync, with Events.
- partitions above spec and a replication-factor change give Stalled with the right reason
  while a config change in the same update still reaches Kafka.
- two objects in two namespaces for one topic: the older keeps it, the other TopicConflict;
  deleting the losing object (deletionPolicy Delete) leaves the topic.
- deletionPolicy Delete deletes the topic, Retain keeps it; rillet.io/managed=false keeps it.
- rillet.io/paused stops reconciling and says so; unpausing resumes.
- a namespace holding Topics is deleted completely.
- the metrics endpoint counts reconciles.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic, ResourceType

from rillet.devstack.operating import OperatorProcess

from .conftest import Kube
from .kafka_reads import kafka_overrides, kafka_partitions
from .objects import (
    apply,
    condition,
    events,
    exists,
    get,
    topic,
    wait_condition,
)
from .polling import wait_for

pytestmark = pytest.mark.usefixtures("operator")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_create_topic_with_partitions_and_config(
    kube: Kube, namespace: str, kafka_admin: AdminClient
) -> None:
    name = unique("orders")
    apply(
        kube,
        topic(
            name,
            namespace,
            partitions=3,
            config={"retention.ms": 3_600_000, "cleanup.policy": "delete"},
        ),
    )

    obj = wait_condition(kube, "topic", name, namespace)

    assert kafka_partitions(kafka_admin, name) == 3
    assert kafka_overrides(kafka_admin, name) == {
        "retention.ms": "3600000",
        "cleanup.policy": "delete",
    }
    status = obj["status"]
    assert status["topicName"] == name
    assert status["partitions"] == 3
    assert status["replicationFactor"] == 1
    assert status["topicId"]
    assert status["observedGeneration"] == obj["metadata"]["generation"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Ready": "True",
        "Reconciling": "False",
        "Stalled": "False",
    }
    assert "TopicCreated" in {e["reason"] for e in events(kube, namespace, name)}


def test_existing_topic_is_adopted_and_brought_in_line(
    kube: Kube, namespace: str, kafka_admin: AdminClient
) -> None:
    name = unique("legacy")
    kafka_admin.create_topics(
        [
            NewTopic(
                name,
                2,
                1,
                config={
                    "retention.ms": "1000",
                    "segment.bytes": "1048576",
                },
            )
        ]
    )[name].result(timeout=30)

    apply(kube, topic(name, namespace, partitions=4, config={"retention.ms": 86_400_000}))
    wait_condition(kube, "topic", name, namespace)

    assert kafka_partitions(kafka_admin, name) == 4
    assert kafka_overrides(kafka_admin, name) == {"retention.ms": "86400000"}


def test_grow_partitions_change_and_remove_config_in_one_update(
    kube: Kube, namespace: str, kafka_admin: AdminClient
) -> None:
    name = unique("clicks")
    apply(
        kube,
        topic(
            name,
            namespace,
            partitions=2,
            config={"retention.ms": 600_000, "max.message.bytes": 2_000_000},
        ),
    )
    wait_condition(kube, "topic", name, namespace)

    kube.kubectl(
        "patch",
        "topic",
        name,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec": {"partitions": 6, "config": {"retention.ms": 1200000, '
        '"max.message.bytes": null}}}',
    )
    obj = wait_condition(kube, "topic", name, namespace)

    assert kafka_partitions(kafka_admin, name) == 6
    assert kafka_overrides(kafka_admin, name) == {"retention.ms": "1200000"}
    assert obj["status"]["partitions"] == 6
    assert obj["status"]["config"] == {"retention.ms": "1200000"}


def test_values_equal_by_type_never_loop(
    kube: Kube, namespace: str, kafka_admin: AdminClient, operator: OperatorProcess
) -> None:
    name = unique("typed")
    apply(
        kube,
        topic(
            name,
            namespace,
            config={
                "min.cleanable.dirty.ratio": "0.50",
                "retention.ms": "1000000",
                "preallocate": "true",
                "retention.bytes": 1_000_000_000,
                "cleanup.policy": "delete,compact",
            },
        ),
    )
    wait_condition(kube, "topic", name, namespace)
    changes_after_create = [
        e
        for e in events(kube, namespace, name)
        if e["reason"] in ("ConfigChanged", "DriftCorrected")
    ]

    # Two resyncs (3 s each) later, nothing more was changed.
    reconciles = _reconcile_count(operator)
    wait_for(
        lambda: _reconcile_count(operator) >= reconciles + 2, timeout=30, what="two more reconciles"
    )
    assert [
        e
        for e in events(kube, namespace, name)
        if e["reason"] in ("ConfigChanged", "DriftCorrected")
    ] == changes_after_create
    assert kafka_overrides(kafka_admin, name)["min.cleanable.dirty.ratio"] == "0.5"


def _reconcile_count(operator: OperatorProcess) -> float:
    text = httpx.get(f"http://127.0.0.1:{operator.metrics_port}/metrics").text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith('rillet_reconciles_total{kind="Topic"')
    )


def test_config_drift_in_kafka_is_reverted_within_a_resync(
    kube: Kube, namespace: str, kafka_admin: AdminClient
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
    assert "DriftCorrected" in {e["reason"] for e in events(kube, namespace, name)}


def test_topic_deleted_out_of_band_is_recreated(
    kube: Kube, namespace: str, kafka_admin: AdminClient
) -> None:
    name = unique("gone")
    apply(kube, topic(name, namespace, partitions=2))
    first_id = wait_condition(kube, "topic", name, namespace)["status"]["topicId"]

    kafka_admin.delete_topics([name])[name].result(timeout=30)

    def recreated() -> dict[str, Any] | None:
        obj = get(kube, "topic", name, namespace)
        new_id = obj["status"].get("topicId")
        return (
            obj
            if new_id and new_id != first_id and kafka_partitions(kafka_admin, name) == 2
            else None
        )

    wait_for(recreated, timeout=20, what="the topic recreated with a new id")


def test_partitions_above_spec_stall_while_config_still_applies(
    kube: Kube, namespace: str, kafka_admin: AdminClient
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
    kube: Kube, namespace: str, kafka_admin: AdminClient
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


def test_two_objects_for_one_topic_oldest_wins_and_loser_deletion_keeps_topic(
    kube: Kube, namespace: str, kafka_admin: AdminClient
) -> None:
    other = f"t-{uuid.uuid4().hex[:10]}"
    kube.kubectl("create", "namespace", other)
    try:
        kafka_name = unique("shared")
        apply(kube, topic("first", namespace, partitions=2, topicName=kafka_name))
        wait_condition(kube, "topic", "first", namespace)
        apply(
            kube,
            topic("second", other, partitions=3, topicName=kafka_name, deletionPolicy="Delete"),
        )

        loser = wait_condition(
            kube, "topic", "second", other, condition_type="Stalled", reason="TopicConflict"
        )
        assert f"Topic {namespace}/first" in condition(loser, "Stalled")["message"]
        assert kafka_partitions(kafka_admin, kafka_name) == 2

        kube.kubectl("delete", "topic", "second", "-n", other, "--timeout=60s")
        assert kafka_partitions(kafka_admin, kafka_name) == 2
        wait_condition(kube, "topic", "first", namespace)
    finally:
        kube.kubectl("delete", "namespace", other, "--wait=false", check=False)


@pytest.mark.parametrize(
    ("policy", "annotations", "kept"),
    [
        ("Delete", {}, False),
        ("Retain", {}, True),
        ("Delete", {"rillet.io/managed": "false"}, True),
    ],
    ids=["delete", "retain", "unmanaged"],
)
def test_deletion_follows_policy(
    kube: Kube,
    namespace: str,
    kafka_admin: AdminClient,
    policy: str,
    annotations: dict[str, str],
    kept: bool,
) -> None:
    name = unique("del")
    apply(kube, topic(name, namespace, deletionPolicy=policy))
    wait_condition(kube, "topic", name, namespace, reason="TopicReady")
    for key, value in annotations.items():
        kube.kubectl("annotate", "topic", name, "-n", namespace, f"{key}={value}")
        wait_condition(kube, "topic", name, namespace, reason="Unmanaged")
    finalizers = get(kube, "topic", name, namespace)["metadata"].get("finalizers", [])
    assert ("rillet.io/finalizer" in finalizers) == (not kept)

    kube.kubectl("delete", "topic", name, "-n", namespace, "--timeout=60s")

    if kept:
        assert kafka_partitions(kafka_admin, name) == 1
    else:
        wait_for(
            lambda: kafka_partitions(kafka_admin, name) is None,
            timeout=20,
            what="the topic deleted from Kafka",
        )


def test_paused_topic_is_left_alone_until_unpaused(
    kube: Kube, namespace: str, kafka_admin: AdminClient
) -> None:
    name = unique("paused")
    apply(kube, topic(name, namespace, partitions=1))
    wait_condition(kube, "topic", name, namespace)
    kube.kubectl("annotate", "topic", name, "-n", namespace, "rillet.io/paused=true")
    kube.kubectl(
        "patch", "topic", name, "-n", namespace, "--type=merge", "-p", '{"spec": {"partitions": 3}}'
    )

    obj = wait_condition(
        kube,
        "topic",
        name,
        namespace,
        condition_type="Reconciling",
        status="False",
        reason="ReconciliationPaused",
    )
    assert "rillet.io/paused" in condition(obj, "Reconciling")["message"]
    assert kafka_partitions(kafka_admin, name) == 1

    kube.kubectl("annotate", "topic", name, "-n", namespace, "rillet.io/paused-")
    wait_condition(kube, "topic", name, namespace, reason="TopicReady")
    assert kafka_partitions(kafka_admin, name) == 3


def test_namespace_holding_topics_is_deleted_completely(
    kube: Kube, kafka_admin: AdminClient
) -> None:
    doomed = f"t-{uuid.uuid4().hex[:10]}"
    kube.kubectl("create", "namespace", doomed)
    names = [unique("ns-del"), unique("ns-keep")]
    apply(
        kube,
        topic(names[0], doomed, deletionPolicy="Delete"),
        topic(names[1], doomed, deletionPolicy="Retain"),
    )
    for name in names:
        wait_condition(kube, "topic", name, doomed)

    kube.kubectl("delete", "namespace", doomed, "--timeout=90s")

    assert not exists(kube, "namespace", doomed, "default")
    wait_for(
        lambda: kafka_partitions(kafka_admin, names[0]) is None,
        timeout=20,
        what="the Delete topic gone from Kafka",
    )
    assert kafka_partitions(kafka_admin, names[1]) == 1


def test_metrics_count_reconciles_by_kind_and_reason(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    name = unique("metered")
    apply(kube, topic(name, namespace))
    wait_condition(kube, "topic", name, namespace)
    text = httpx.get(f"http://127.0.0.1:{operator.metrics_port}/metrics").text
    assert 'rillet_reconciles_total{kind="Topic",reason="TopicReady"}' in text
    assert "rillet_topic_queue_depth" in text
    assert "rillet_reconcile_duration_seconds_bucket" in text
