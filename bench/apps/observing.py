"""Reading an App from outside: its status, its pods, its consumer group's lag, its
Topic's partitions; producing records into it and deleting it.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from bench.apps import benches, settings
from rillet.kafka.lag import LagReader
from rillet.reconcile import naming


def app_body(b: benches.Bench, namespace: str, name: str) -> dict[str, Any]:
    found = b.custom.get_namespaced_custom_object(
        settings.GROUP, settings.VERSION, namespace, "apps", name
    )
    return cast(dict[str, Any], found)


def executors_status(b: benches.Bench, namespace: str, name: str) -> dict[str, Any]:
    return dict((app_body(b, namespace, name).get("status") or {}).get("executors") or {})


def pods_of(core: Any, namespace: str, app: str, role: str) -> list[Any]:
    selector = f"rillet.io/app={app},rillet.io/role={role}"
    return list(core.list_namespaced_pod(namespace, label_selector=selector).items)


def running(core: Any, namespace: str, app: str, role: str = "executor") -> int:
    """Pods of the App in that role that run and are not being deleted."""
    return sum(
        1
        for pod in pods_of(core, namespace, app, role)
        if pod.status.phase == "Running" and pod.metadata.deletion_timestamp is None
    )


def group_lag(reader: LagReader, namespace: str, app: str, topic: str) -> int | None:
    """The App's consumer group's lag on `topic`, as the operator reads it (all of a partition
    the group has not committed counts: the Apps read from the earliest offsets)."""
    group = naming.consumer_group(namespace=namespace, app=app)
    found = asyncio.run(reader.observe({group: [topic]}, from_start={(group, topic)}))
    return found[(group, topic)].lag


def kafka_partitions(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def produce(
    bootstrap: str, topic: str, count: int, *, tag: str = "r", partitions: int | None = None
) -> None:
    """`count` records; round-robin over `partitions` when given (each task of a batch reads one
    partition: skewed partitions would time the slowest task, not the executor count)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(count):
        partition = -1 if partitions is None else i % partitions  # -1: the partitioner's
        while True:
            try:
                producer.produce(topic, value=f"{tag} {i}".encode(), partition=partition)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def delete_app(b: benches.Bench, namespace: str, name: str) -> None:
    """Delete the App and wait until its pods (driver and executors) are gone."""
    b.kubectl("delete", "app", name, "-n", namespace, "--ignore-not-found")
    benches.wait_for(
        lambda: (
            not pods_of(b.core, namespace, name, "driver")
            and not pods_of(b.core, namespace, name, "executor")
        ),
        timeout=300,
        what=f"the pods of App {namespace}/{name} gone",
    )
