"""The operator keeps Kafka topics exactly as their Topic objects declare.

Test plan (each claim checked in Kafka with an independent AdminClient read):
- create: partitions, config and replication factor in Kafka; status (topicName, the topicId
  Kafka reports, observedGeneration, Ready).
- grow partitions, change and remove config in one update.
- values equal by type (0 vs 0.0, 1000 vs "1000") never cause a change at resync: two
  reconciles of that very object (an operator of its own, watching nothing else) change nothing.
- two objects in two namespaces for one topic: the older keeps it, the other TopicConflict;
  deleting the losing object (deletionPolicy Delete) leaves the topic.
- deletionPolicy Delete deletes the topic, Retain keeps it; rillet.io/managed=false keeps it.
- rillet.io/paused stops reconciling and says so; unpausing resumes.
- a namespace holding Topics is deleted completely.
- the operator's quotas: a Topic asking for more partitions than the cap, and the newest Topic
  beyond the cap on their number, are Stalled (QuotaExceeded, with an Event) and reach no
  Kafka; once one is deleted, the newest fits and is made.
- the metrics endpoint counts each reconcile of an object, by kind and reason (an operator
  watching only the test's objects, so every count is theirs).
(Adopting existing topics is test_topic_adoption.py's; drift and changes Kafka cannot make,
test_topic_drift.py's; more promises, Kafka refusals, management turned off and the deletion
race, test_topic_promises.py's.)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka.admin import AdminClient

from rillet_devstack.operating import OperatorProcess

from . import scraping
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
    exists,
    get,
    topic,
    wait_condition,
    wait_event,
)
from .polling import wait_for
from .scraping import metric

pytestmark = pytest.mark.usefixtures("operator")


def test_create_topic_with_partitions_and_config(
    kube: Kube, namespace: str, kafka_admin: AdminClient, unique: Unique
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
    assert kafka_replication_factors(kafka_admin, name) == {1}
    assert kafka_overrides(kafka_admin, name) == {
        "retention.ms": "3600000",
        "cleanup.policy": "delete",
    }
    status = obj["status"]
    assert status["topicName"] == name
    assert status["partitions"] == 3
    assert status["replicationFactor"] == 1
    assert status["topicId"] == kafka_topic_id(kafka_admin, name)
    assert status["observedGeneration"] == obj["metadata"]["generation"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Ready": "True",
        "Reconciling": "False",
        "Stalled": "False",
    }
    wait_event(kube, namespace, name, "TopicCreated")


def test_grow_partitions_change_and_remove_config_in_one_update(
    kube: Kube, namespace: str, kafka_admin: AdminClient, unique: Unique
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
    kube: Kube,
    kafka_admin: AdminClient,
    unique: Unique,
    lone_operator: Callable[..., OperatorProcess],
) -> None:
    # An operator of its own: every reconcile it counts is of this object.
    own = lone_operator(resync_seconds=1.0)
    own.start()
    namespace = own.namespace_pattern
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

    # Two reconciles of this object (resyncs, 1 s apart) later, nothing more was changed.
    reconciles = metric(own, "rillet_reconciles_total", kind="Topic")
    wait_for(
        lambda: metric(own, "rillet_reconciles_total", kind="Topic") >= reconciles + 2,
        timeout=30,
        what="two more reconciles of the object",
    )
    page = scraping.scrape(own)
    assert scraping.value(page, "rillet_reconciles_total", kind="Topic", reason="TopicReady") == (
        scraping.value(page, "rillet_reconciles_total", kind="Topic")
    ), "every reconcile found the topic as declared"
    assert [
        e
        for e in events(kube, namespace, name)
        if e["reason"] in ("ConfigChanged", "DriftCorrected")
    ] == changes_after_create
    assert kafka_overrides(kafka_admin, name)["min.cleanable.dirty.ratio"] == "0.5"


def test_two_objects_for_one_topic_oldest_wins_and_loser_deletion_keeps_topic(
    kube: Kube,
    namespace: str,
    new_namespace: Callable[..., str],
    kafka_admin: AdminClient,
    unique: Unique,
) -> None:
    other = new_namespace()
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
    unique: Unique,
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
    kube: Kube, namespace: str, kafka_admin: AdminClient, unique: Unique
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
    kube: Kube, new_namespace: Callable[..., str], kafka_admin: AdminClient, unique: Unique
) -> None:
    doomed = new_namespace()
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
    kube: Kube, unique: Unique, lone_operator: Callable[..., OperatorProcess]
) -> None:
    # An operator watching only this test's namespace, no resync: every count is a reconcile
    # of the objects below, made by their kopf handlers.
    own = lone_operator(resync_seconds=3600.0)
    own.start()
    namespace = own.namespace_pattern
    wait_for(lambda: scraping.serving(own), timeout=60, what="the metrics endpoint")
    assert metric(own, "rillet_reconciles_total") == 0

    name = unique("metered")
    apply(kube, topic(name, namespace))
    wait_condition(kube, "topic", name, namespace)
    assert metric(own, "rillet_reconciles_total", kind="Topic", reason="TopicReady") == 1

    kube.kubectl(
        "patch", "topic", name, "-n", namespace, "--type=merge", "-p", '{"spec": {"partitions": 2}}'
    )
    wait_condition(kube, "topic", name, namespace)
    assert metric(own, "rillet_reconciles_total", kind="Topic", reason="TopicReady") == 2

    apply(kube, topic(unique("rival"), namespace, topicName=name))
    wait_condition(
        kube, "topic", unique("rival"), namespace, condition_type="Stalled", reason="TopicConflict"
    )
    conflicts = metric(own, "rillet_reconciles_total", kind="Topic", reason="TopicConflict")
    assert conflicts >= 1
    page = scraping.scrape(own)
    errors = scraping.value(
        page, "rillet_reconcile_errors_total", kind="Topic", reason="TopicConflict"
    )
    assert errors == conflicts
    assert scraping.value(page, "rillet_reconcile_duration_seconds_count", kind="Topic") == (
        scraping.value(page, "rillet_reconciles_total", kind="Topic")
    )
    assert scraping.value(page, "rillet_topic_queue_depth") == 0


def test_the_operators_quotas_stall_what_is_over_them(
    kube: Kube,
    kafka_admin: AdminClient,
    unique: Unique,
    lone_operator: Callable[..., OperatorProcess],
) -> None:
    caps = {"RILLET_MAX_PARTITIONS_PER_TOPIC": "4", "RILLET_MAX_TOPICS_PER_NAMESPACE": "2"}
    own = lone_operator(resync_seconds=2.0, settings=caps)
    own.start()
    namespace = own.namespace_pattern
    fits, wide, third = unique("fits"), unique("wide"), unique("third")
    apply(kube, topic(fits, namespace, partitions=4))
    wait_condition(kube, "topic", fits, namespace)
    apply(kube, topic(wide, namespace, partitions=5, deletionPolicy="Delete"))
    stalled = wait_condition(
        kube, "topic", wide, namespace, condition_type="Stalled", reason="QuotaExceeded"
    )
    assert "5 partitions is more than the 4 per topic" in condition(stalled, "Stalled")["message"]
    # Creation times have whole seconds, and objects of the same second are ranked by uid: the
    # third must be made in a later second than the wide one to be the newest for sure.
    made = datetime.fromisoformat(
        get(kube, "topic", wide, namespace)["metadata"]["creationTimestamp"]
    )
    wait_for(
        lambda: datetime.now(UTC) >= made + timedelta(seconds=1),
        timeout=5,
        interval=0.1,
        what="a second after the wide Topic was made",
    )
    apply(kube, topic(third, namespace, partitions=1))
    stalled = wait_condition(
        kube, "topic", third, namespace, condition_type="Stalled", reason="QuotaExceeded"
    )
    assert (
        f"namespace {namespace} already has 2 Topics and Tables"
        in (condition(stalled, "Stalled")["message"])
    )
    wait_event(kube, namespace, third, "QuotaExceeded")
    topics = kafka_admin.list_topics(timeout=30).topics
    assert fits in topics
    assert wide not in topics
    assert third not in topics

    # One gone, the newest fits: the resync takes it from there.
    kube.kubectl("delete", "topic", wide, "-n", namespace, "--wait=true", "--timeout=60s")
    wait_condition(kube, "topic", third, namespace, timeout=60)
    assert kafka_partitions(kafka_admin, third) == 1
