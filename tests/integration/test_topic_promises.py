"""Promises of the Topic operator beyond the everyday path, each checked in Kafka.

Test plan:
- a config Kafka refuses (segment.bytes below Kafka's minimum, which the CRD cannot know):
  on a new Topic, no topic is made; on an existing one, its config stays as it was; either way
  the Topic is Stalled with Kafka's error as a CamelCase reason (InvalidConfig), a message
  naming the refused action, and a Warning Event.
- `rillet.io/managed: "false"`: neither drift made in Kafka nor a spec change is applied, over
  several resync passes of the operator (each takes every settled object); with the
  annotation removed, the spec is applied again.
- the deletion race: Topics with deletionPolicy Delete are deleted one at a time, at random
  moments, while an operator of the test's own resyncs back to back (every deletion lands
  during a resync pass, some while the pass's requests for the deleted object are queued):
  every topic is deleted from Kafka and none comes back, over later passes too.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from rillet.devstack.operating import OperatorProcess

from .conftest import Kube
from .kafka_reads import kafka_overrides, kafka_partitions
from .objects import apply, condition, events, topic, wait_condition
from .polling import wait_for
from .scraping import metric

CAMEL_CASE = re.compile(r"[A-Z][a-z]+(?:[A-Z][a-z]+)+")
CHANGES = ("TopicCreated", "PartitionsAdded", "ConfigChanged", "DriftCorrected")


def _warnings(kube: Kube, namespace: str, name: str) -> set[str]:
    return {e["reason"] for e in events(kube, namespace, name) if e["type"] == "Warning"}


def _patch(kube: Kube, namespace: str, name: str, spec: dict[str, object]) -> None:
    kube.kubectl(
        "patch", "topic", name, "-n", namespace, "--type=merge", "-p", json.dumps({"spec": spec})
    )


@pytest.mark.usefixtures("operator")
def test_a_config_kafka_refuses_stalls_with_kafkas_reason(
    kube: Kube, namespace: str, kafka_admin: AdminClient, kafka_prefix: str
) -> None:
    new = f"{kafka_prefix}-refused"
    apply(kube, topic(new, namespace, config={"segment.bytes": 1}))

    stalled = wait_condition(
        kube, "topic", new, namespace, condition_type="Stalled", reason="InvalidConfig"
    )
    assert CAMEL_CASE.fullmatch(condition(stalled, "Stalled")["reason"])
    assert f"Kafka refused to create topic {new}" in condition(stalled, "Stalled")["message"]
    assert "segment.bytes" in condition(stalled, "Stalled")["message"]
    assert condition(stalled, "Ready")["status"] == "False"
    assert kafka_partitions(kafka_admin, new) is None
    assert "InvalidConfig" in _warnings(kube, namespace, new)

    existing = f"{kafka_prefix}-kept"
    apply(kube, topic(existing, namespace, config={"segment.bytes": 8_388_608}))
    wait_condition(kube, "topic", existing, namespace)
    _patch(kube, namespace, existing, {"config": {"segment.bytes": 1}})

    refused = wait_condition(
        kube, "topic", existing, namespace, condition_type="Stalled", reason="InvalidConfig"
    )
    message = condition(refused, "Stalled")["message"]
    assert f"Kafka refused to change the config of topic {existing}" in message
    assert kafka_overrides(kafka_admin, existing) == {"segment.bytes": "8388608"}
    assert "InvalidConfig" in _warnings(kube, namespace, existing)


def _drift(admin: AdminClient, name: str, **config: str) -> None:
    resource = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry(key.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
            for key, value in config.items()
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=10)


def test_an_unmanaged_topic_ignores_drift_and_spec_changes(
    kube: Kube,
    namespace: str,
    kafka_admin: AdminClient,
    kafka_prefix: str,
    operator: OperatorProcess,
) -> None:
    name = f"{kafka_prefix}-unmanaged"
    apply(kube, topic(name, namespace, partitions=1, config={"retention.ms": 600_000}))
    wait_condition(kube, "topic", name, namespace, reason="TopicReady")
    kube.kubectl("annotate", "topic", name, "-n", namespace, "rillet.io/managed=false")
    wait_condition(kube, "topic", name, namespace, reason="Unmanaged")
    changes_before = [e for e in events(kube, namespace, name) if e["reason"] in CHANGES]

    _drift(kafka_admin, name, retention_ms="5000", segment_ms="3600000")
    _patch(kube, namespace, name, {"partitions": 3, "config": {"retention.ms": 900_000}})
    wait_condition(kube, "topic", name, namespace, reason="Unmanaged")  # the change observed
    # Passes that start from now on each take the object (settled: its generation observed).
    passes = metric(operator, "rillet_resyncs_total")
    wait_for(
        lambda: metric(operator, "rillet_resyncs_total") >= passes + 3,
        timeout=60,
        what="three resync passes",
    )

    assert kafka_partitions(kafka_admin, name) == 1
    assert kafka_overrides(kafka_admin, name) == {"retention.ms": "5000", "segment.ms": "3600000"}
    assert [e for e in events(kube, namespace, name) if e["reason"] in CHANGES] == changes_before

    kube.kubectl("annotate", "topic", name, "-n", namespace, "rillet.io/managed-")
    wait_condition(kube, "topic", name, namespace, reason="TopicReady")
    assert kafka_partitions(kafka_admin, name) == 3
    assert kafka_overrides(kafka_admin, name) == {"retention.ms": "900000"}


RACES = 40


def test_a_topic_deleted_during_a_resync_never_comes_back(
    kube: Kube,
    kafka_admin: AdminClient,
    kafka_prefix: str,
    lone_operator: Callable[..., OperatorProcess],
) -> None:
    # Passes back to back, each a batch that waits 0.2 s to fill: a deletion has a fair chance
    # to fall between a pass reading the object and its batch taking the request.
    own = lone_operator(resync_seconds=0.05, settings={"RILLET_BATCH_LINGER_SECONDS": "0.2"})
    own.start()
    namespace = own.namespace_pattern
    names = [f"{kafka_prefix}-race-{i:02d}" for i in range(RACES)]
    apply(kube, *(topic(name, namespace, deletionPolicy="Delete") for name in names))

    def settled() -> int:
        return sum(
            condition(item, "Ready").get("status") == "True"
            and item["status"].get("observedGeneration") == item["metadata"]["generation"]
            for item in kube.api.list("topic", namespace)
        )

    wait_for(lambda: settled() == RACES, timeout=120, what=f"{RACES} Topics Ready")
    assert all(kafka_partitions(kafka_admin, name) == 1 for name in names)

    rng = random.Random()
    passes = metric(own, "rillet_resyncs_total")
    for name in rng.sample(names, len(names)):
        kube.kubectl("delete", "topic", name, "-n", namespace, "--wait=false")
        time.sleep(rng.uniform(0, 0.3))
    passes_while_deleting = metric(own, "rillet_resyncs_total") - passes
    assert passes_while_deleting >= RACES / 2, "the resync should run through the deletions"

    def topics_left() -> list[object]:
        return list(kube.api.list("topic", namespace))

    wait_for(
        lambda: not topics_left(),
        timeout=120,
        what="every Topic deleted (finalizers released)",
    )

    def in_kafka() -> set[str]:
        return set(names) & set(kafka_admin.list_topics(timeout=10).topics)

    # A topic created again after its deletion stays: nothing deletes it any more.
    left = in_kafka()
    deadline = time.monotonic() + 60
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = in_kafka()
    assert not left, f"{len(left)} of {RACES} deleted topics are back in Kafka: {sorted(left)}"
    after = metric(own, "rillet_resyncs_total")
    seen: set[str] = set()

    def later_passes() -> bool:
        seen.update(in_kafka())
        return metric(own, "rillet_resyncs_total") >= after + 10

    wait_for(later_passes, timeout=60, interval=0.1, what="ten later resync passes")
    assert not seen | in_kafka(), f"deleted topics came back: {sorted(seen | in_kafka())}"
