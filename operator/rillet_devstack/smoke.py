"""A quick end-to-end check of a running stack: Kubernetes answers, Kafka round-trips a record,
Spark reads it back through the Kafka connector."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from rillet_devstack import tools, versions
from rillet_devstack.stack import StackState

Check = Callable[[StackState], str]


def check_kubernetes(state: StackState) -> str:
    """The stack's kubectl reaches the apiserver, which reports the pinned version."""
    result = tools.run_kubectl(state.kubeconfig, ["get", "--raw", "/version"], timeout=30)
    result.check_returncode()
    out = result.stdout
    version = json.loads(out)["gitVersion"]
    if version != f"v{versions.KUBERNETES}":
        raise RuntimeError(f"apiserver reports {version}, expected v{versions.KUBERNETES}")
    return f"kube-apiserver {version}"


def _fresh_topic(
    client: dict[str, Any], *, prefix: str, partitions: int
) -> tuple[str, AdminClient, Producer]:
    """A new topic `<prefix>.<random>`, the admin client that made it (to delete it with) and a
    producer to fill it."""
    topic = f"{prefix}.{uuid.uuid4().hex[:8]}"
    admin = AdminClient(client)
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(timeout=30)
    return topic, admin, Producer(client)


def check_kafka(state: StackState) -> str:
    """A record produced to a fresh topic is consumed back."""
    client = state.kafka_client_config()
    topic, admin, producer = _fresh_topic(client, prefix="rillet.smoke", partitions=1)
    producer.produce(topic, key=b"k", value=b"hello")
    producer.flush(10)
    consumer = Consumer(
        {
            **client,
            "group.id": topic,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    try:
        message = consumer.poll(30)
    finally:
        consumer.close()
    admin.delete_topics([topic])[topic].result(timeout=30)
    if message is None or message.error() or message.value() != b"hello":
        raise RuntimeError(f"record not read back from {topic}")
    secured = ", SASL_SSL" if state.kafka_security else ""
    return f"kafka at {state.kafka_bootstrap} ({state.kafka_brokers} broker(s){secured})"


def check_spark(state: StackState) -> str:
    """Spark's Kafka source loads and reads a topic's records."""
    from rillet_devstack.spark import local_session

    client = state.kafka_client_config()
    topic, admin, producer = _fresh_topic(client, prefix="rillet.smoke.spark", partitions=2)
    for i in range(100):
        producer.produce(topic, value=str(i).encode())
    producer.flush(10)
    spark = local_session("rillet-smoke", master="local[1]")
    try:
        count = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", state.kafka_bootstrap)
            .option("subscribe", topic)
            .load()
            .count()
        )
    finally:
        spark.stop()
        admin.delete_topics([topic])
    if count != 100:
        raise RuntimeError(f"spark read {count} records of 100")
    return "spark read 100 of 100 records through the Kafka connector"


CHECKS: tuple[tuple[str, Check], ...] = (
    ("kubernetes", check_kubernetes),
    ("kafka", check_kafka),
    ("spark", check_spark),
)
