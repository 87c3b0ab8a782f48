"""An App suspended and resumed, and its executors scaled on partitions and lag, without pods.

These need no running pod (the driver pod may stay Pending): what is checked is what the
operator writes, and the apiserver's own answers.

Test plan:
- suspend: the StatefulSet goes to 0 replicas, the App is Suspended (Argo CD: Suspended, not
  Progressing; no condition True); resuming brings the driver back;
- scaling without pods: the executor cap follows the input partitions (a Topic grown from 2 to
  6 partitions raises it within seconds); lag committed to the App's consumer group raises the
  desired count (never past the cap) and, once drained, lowers it after the stabilization
  window, with an ExecutorsScaled Event per change; the operator's quota of executors per App
  caps the desired count below the partitions' cap, and the Event says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from rillet_devstack.operating import OperatorProcess

from .conftest import Kube, Unique
from .gitopshealth import argocd_health
from .objects import (
    applied_app,
    condition,
    events,
    get,
    wait_condition,
    wait_event,
)
from .polling import wait_for


def replicas(kube: Kube, name: str, namespace: str) -> int:
    return int(get(kube, "statefulset", f"{name}-driver", namespace)["spec"]["replicas"])


@pytest.mark.usefixtures("operator")
def test_suspend_stops_the_driver_and_resume_brings_it_back(
    kube: Kube, namespace: str, unique: Unique
) -> None:
    name, _ = applied_app(kube, namespace, unique)
    assert replicas(kube, name, namespace) == 1

    kube.kubectl(
        "patch", "app", name, "-n", namespace, "--type=merge", "-p", '{"spec": {"suspend": true}}'
    )
    suspended = wait_condition(
        kube,
        "app",
        name,
        namespace,
        condition_type="Reconciling",
        status="False",
        reason="Suspended",
    )
    assert suspended["status"]["phase"] == "Suspended"
    # No Ready at all: Ready False would keep Flux's health checks waiting (docs/health.md).
    assert [condition(suspended, c).get("status") for c in ("Ready", "Reconciling", "Stalled")] == [
        None,
        "False",
        "False",
    ]
    assert argocd_health(suspended)[0] == "Suspended"
    assert replicas(kube, name, namespace) == 0

    kube.kubectl(
        "patch", "app", name, "-n", namespace, "--type=merge", "-p", '{"spec": {"suspend": false}}'
    )
    wait_for(lambda: replicas(kube, name, namespace) == 1, timeout=30, what="replicas back to 1")
    resumed = wait_for(
        lambda: (
            (obj := get(kube, "app", name, namespace))["status"].get("phase") != "Suspended"
            and obj["status"].get("observedGeneration") == obj["metadata"]["generation"]
            and obj
        ),
        timeout=30,
        what="the App no longer Suspended",
    )
    assert argocd_health(resumed)[0] != "Suspended"


def executors(kube: Kube, name: str, namespace: str) -> dict[str, Any]:
    return dict(get(kube, "app", name, namespace).get("status", {}).get("executors") or {})


def produce(bootstrap: str, topic_name: str, per_partition: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for partition in range(partitions):
        for i in range(per_partition):
            producer.produce(topic_name, value=f"w{i}".encode(), partition=partition)
        producer.poll(0)
    assert producer.flush(30) == 0


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit offsets to the App's group as its runtime does (never subscribing)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


@pytest.mark.usefixtures("operator")
def test_executors_follow_partitions_and_lag(
    kube: Kube, namespace: str, unique: Unique, kafka_bootstrap: str
) -> None:
    scaling = {
        "minExecutors": 1,
        "maxExecutors": 8,
        "lagTarget": 1000,
        "stabilizationWindowSeconds": 6,
    }
    name, obj = applied_app(kube, namespace, unique, partitions=2, scaling=scaling)
    words = obj["spec"]["inputs"][0]["topicRef"]["name"]
    group = f"rillet.{namespace}.{name}"
    first = wait_for(
        lambda: (found := executors(kube, name, namespace)).get("cap") == 2 and found,
        timeout=30,
        what="executors capped at the 2 partitions",
    )
    assert first["desired"] == 1  # no lag known yet: minExecutors

    kube.kubectl(
        "patch",
        "topic",
        words,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec": {"partitions": 6}}',
    )
    grown = time.monotonic()
    wait_for(
        lambda: executors(kube, name, namespace).get("cap") == 6,
        timeout=30,
        what="the cap raised to the 6 partitions",
    )
    assert time.monotonic() - grown < 15

    # 9,000 records behind over 6 partitions: lag 9,000 asks for 9 executors, the cap is 6.
    produce(kafka_bootstrap, words, per_partition=1500, partitions=6)
    commit(kafka_bootstrap, group, {(words, p): 0 for p in range(6)})
    capped = wait_for(
        lambda: (found := executors(kube, name, namespace)).get("desired") == 6 and found,
        timeout=60,
        what="desired executors up to the cap",
    )
    assert capped["cap"] == 6
    status = get(kube, "app", name, namespace)["status"]
    assert status["lag"] == 9000
    assert status["inputs"] == [{"name": "src", "topic": words, "partitions": 6, "lag": 9000}]

    commit(kafka_bootstrap, group, {(words, p): 1500 for p in range(6)})
    wait_for(
        lambda: executors(kube, name, namespace).get("desired") == 1,
        timeout=60,
        what="desired executors back to minExecutors once the lag is gone",
    )
    wait_event(kube, namespace, name, "ExecutorsScaled", saying="1 to 6")
    wait_event(kube, namespace, name, "ExecutorsScaled", saying="6 to 1")


def test_the_operators_quota_caps_an_apps_executors_and_says_so(
    kube: Kube,
    unique: Unique,
    kafka_bootstrap: str,
    lone_operator: Callable[..., OperatorProcess],
) -> None:
    own = lone_operator(settings={"RILLET_APP_MAX_EXECUTORS_PER_APP": "2"})
    own.start()
    namespace = own.namespace_pattern
    scaling = {"minExecutors": 1, "maxExecutors": 8, "lagTarget": 1000}
    name, obj = applied_app(kube, namespace, unique, partitions=6, scaling=scaling)
    words = obj["spec"]["inputs"][0]["topicRef"]["name"]
    # 9,000 records behind over 6 partitions: the lag asks for 9, the partitions allow 6, the
    # operator's quota 2.
    produce(kafka_bootstrap, words, per_partition=1500, partitions=6)
    commit(kafka_bootstrap, f"rillet.{namespace}.{name}", {(words, p): 0 for p in range(6)})
    wait_for(
        lambda: executors(kube, name, namespace).get("desired") == 2,
        timeout=60,
        what="desired executors up to the quota",
    )
    scaled = [
        e["message"] for e in events(kube, namespace, name) if e["reason"] == "ExecutorsScaled"
    ]
    assert any("this operator allows 2 executors per App" in m for m in scaled), scaled
    assert executors(kube, name, namespace)["cap"] == 6
