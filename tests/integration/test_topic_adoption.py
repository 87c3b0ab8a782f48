"""A Topic takes an existing Kafka topic only when told to, and never one another release claims.

Test plan (each claim checked in Kafka with an independent AdminClient read):
- adopt: an existing topic is taken only with the annotation rillet.io/adopt=true (added to a
  Stalled Topic: at once, not at the next resync); with configPolicy Replace it is brought in
  line (overrides not in spec removed).
- an unmanaged pre-existing topic with retention.ms=-1: a Topic (deletionPolicy Delete) without
  the opt-in is Stalled TopicExists with a Warning Event, changes nothing in Kafka, and deleting
  it leaves the topic; a Topic with the opt-in adopts it, keeps retention.ms=-1 (Merge) and sets
  what it declares.
- a topic another Rillet release claims (a second operator, release name of its own, made it)
  is not adopted even with the opt-in: Stalled TopicClaimed naming that release, Kafka unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from rillet_devstack.operating import OperatorProcess

from .conftest import Kube, Unique
from .kafka_reads import (
    kafka_overrides,
    kafka_partitions,
    kafka_topic_id,
)
from .objects import (
    apply,
    condition,
    events,
    exists,
    topic,
    wait_condition,
)
from .polling import wait_for

pytestmark = pytest.mark.usefixtures("operator")

ADOPT = "rillet.io/adopt"


def test_existing_topic_is_adopted_and_brought_in_line(
    kube: Kube, namespace: str, kafka_admin: AdminClient, unique: Unique
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

    manifest = topic(
        name,
        namespace,
        partitions=4,
        config={"retention.ms": 86_400_000},
        configPolicy="Replace",
    )
    manifest["metadata"]["annotations"] = {ADOPT: "true"}
    apply(kube, manifest)
    wait_condition(kube, "topic", name, namespace)

    assert kafka_partitions(kafka_admin, name) == 4
    assert kafka_overrides(kafka_admin, name) == {"retention.ms": "86400000"}


def test_an_unmanaged_topic_is_left_alone_without_the_opt_in_and_merged_with_it(
    kube: Kube, namespace: str, kafka_admin: AdminClient, unique: Unique
) -> None:
    name = unique("forever")
    kept = {"retention.ms": "-1", "segment.bytes": "1048576"}
    kafka_admin.create_topics([NewTopic(name, 2, 1, config=kept)])[name].result(timeout=30)
    original = kafka_topic_id(kafka_admin, name)
    declared = {"retention.ms": 3_600_000, "max.message.bytes": 2_000_000}
    apply(kube, topic(name, namespace, partitions=4, config=declared, deletionPolicy="Delete"))

    stalled = wait_condition(
        kube, "topic", name, namespace, condition_type="Stalled", reason="TopicExists"
    )
    assert ADOPT in condition(stalled, "Stalled")["message"]
    wait_for(
        lambda: "TopicExists" in {e["reason"] for e in events(kube, namespace, name)},
        timeout=20,
        what="a TopicExists Event",
    )
    assert kafka_overrides(kafka_admin, name) == kept
    assert kafka_partitions(kafka_admin, name) == 2

    kube.kubectl("delete", "topic", name, "-n", namespace, "--timeout=60s")
    assert not exists(kube, "topic", name, namespace)
    assert kafka_topic_id(kafka_admin, name) == original
    assert kafka_overrides(kafka_admin, name) == kept

    adopting = topic(name, namespace, partitions=4, config={"max.message.bytes": 2_000_000})
    adopting["metadata"]["annotations"] = {ADOPT: "true"}
    apply(kube, adopting)
    wait_condition(kube, "topic", name, namespace, reason="TopicReady")
    assert kafka_overrides(kafka_admin, name) == kept | {"max.message.bytes": "2000000"}
    assert kafka_partitions(kafka_admin, name) == 4
    assert kafka_topic_id(kafka_admin, name) == original


def test_the_opt_in_added_to_a_stalled_topic_adopts_it_at_once(
    kube: Kube,
    kafka_admin: AdminClient,
    unique: Unique,
    lone_operator: Callable[..., OperatorProcess],
) -> None:
    # A resync far off: only the annotation's change can adopt the topic within the deadline.
    own = lone_operator(resync_seconds=600.0)
    own.start()
    namespace = own.namespace_pattern
    name = unique("later")
    kept = {"retention.ms": "-1"}
    kafka_admin.create_topics([NewTopic(name, 2, 1, config=kept)])[name].result(timeout=30)
    apply(kube, topic(name, namespace, partitions=3))
    wait_condition(kube, "topic", name, namespace, condition_type="Stalled", reason="TopicExists")

    kube.kubectl("annotate", "topic", name, "-n", namespace, f"{ADOPT}=true")
    wait_condition(kube, "topic", name, namespace, reason="TopicReady", timeout=30)
    assert kafka_partitions(kafka_admin, name) == 3
    assert kafka_overrides(kafka_admin, name) == kept


def test_a_topic_another_release_claims_is_not_adopted(
    kube: Kube,
    namespace: str,
    kafka_admin: AdminClient,
    unique: Unique,
    lone_operator: Callable[..., OperatorProcess],
) -> None:
    release = f"{namespace}/other-release"
    other = lone_operator(settings={"RILLET_RELEASE": release})
    other.start()
    name = unique("theirs")
    apply(kube, topic(name, other.namespace_pattern, config={"retention.ms": 600_000}))
    wait_condition(kube, "topic", name, other.namespace_pattern, reason="TopicReady", timeout=90)

    taker = topic("taker", namespace, partitions=3, topicName=name, deletionPolicy="Delete")
    taker["spec"]["config"] = {"retention.ms": 1000}
    taker["metadata"]["annotations"] = {ADOPT: "true"}
    apply(kube, taker)

    stalled = wait_condition(
        kube, "topic", "taker", namespace, condition_type="Stalled", reason="TopicClaimed"
    )
    message = condition(stalled, "Stalled")["message"]
    assert release in message
    assert f"Topic {other.namespace_pattern}/{name}" in message
    assert kafka_overrides(kafka_admin, name) == {"retention.ms": "600000"}
    assert kafka_partitions(kafka_admin, name) == 1
    kube.kubectl("delete", "topic", "taker", "-n", namespace, "--timeout=60s")
    assert kafka_partitions(kafka_admin, name) == 1
