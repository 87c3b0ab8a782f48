"""Losing one of three brokers mid-stream (real KRaft brokers, operator, Spark).

Test plan (three brokers of the test's own; Topic and Table with replication factor 3 and
min.insync.replicas 2; the operator manages both; a word count runs in this process, from the
Topic into the Table, while a producer with acks=all writes words at a steady pace):
- the operator's claims topic (which object owns which Kafka topic) has three in-sync replicas
  too, as the operator created it;
- the broker leading the claims topic's partition is SIGKILLed a third of the way in: the
  producer's writes keep succeeding (two replicas in sync are enough), the App keeps finishing
  batches, and the Topic and Table stay Ready through several resyncs, the claims leaderless
  for a while among them (Ready means the topic is there as declared; under-replication is the
  brokers' health, which Kafka's own metrics report: see docs/health.md);
- the Table equals the ground truth of every acknowledged word, with that broker still down;
- the broker is started again: every partition of both topics is back to three in-sync
  replicas, and the Table is still exact: nothing lost, nothing counted twice.
The counts are printed in the session's summary.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient

from rillet.runtime.batches import progress
from rillet_devstack import provisioning
from rillet_devstack.kafka import KafkaCluster
from rillet_devstack.operating import OperatorProcess

from . import runtime_helpers as rt
from .conftest import Kube
from .objects import apply, condition, get, table, topic, wait_condition
from .polling import wait_for
from .wordcounts import table_counts

CLAIMS = "__rillet_claims"
WORDS = [f"w{n}" for n in range(50)]
RECORDS = 6_000
PER_SECOND = 150
REPLICATED = {"replicationFactor": 3, "config": {"min.insync.replicas": "2"}}

COUNT_WORDS = "SELECT value AS word, count(*) AS count FROM words GROUP BY value"


@pytest.fixture
def three_brokers(tmp_path: Path) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(
        libs=provisioning.KAFKA.directory / "libs", root=tmp_path / "kafka", brokers=3, heap="384m"
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.kill_all()


class PacedProducer(threading.Thread):
    """Produces RECORDS words at PER_SECOND; counts only what Kafka acknowledged."""

    def __init__(self, bootstrap: str, topic_name: str) -> None:
        super().__init__(daemon=True)
        self.topic_name = topic_name
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}
        )
        self.acknowledged: Counter[str] = Counter()
        self.failed: list[str] = []
        self.sent = 0

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failed.append(str(error))
        else:
            self.acknowledged[(message.value() or b"").decode()] += 1

    def run(self) -> None:
        rng = random.Random(11)
        stop = threading.Event()
        for index in range(RECORDS):
            self.producer.produce(
                self.topic_name, value=rng.choice(WORDS).encode(), on_delivery=self._delivered
            )
            self.sent = index + 1
            self.producer.poll(0)
            stop.wait(1 / PER_SECOND)
        self.producer.flush(120)


def _in_sync(admin: AdminClient, name: str) -> bool:
    partitions = admin.list_topics(topic=name, timeout=10).topics[name].partitions
    return bool(partitions) and all(len(p.isrs) == 3 for p in partitions.values())


def test_one_broker_of_three_lost_mid_stream(
    kube: Kube,
    kafka_prefix: str,
    three_brokers: KafkaCluster,
    lone_operator: Callable[..., OperatorProcess],
    measurement: Callable[[str], None],
    tmp_path: Path,
) -> None:
    own = lone_operator(settings={"RILLET_KAFKA_BOOTSTRAP": three_brokers.bootstrap})
    own.start()
    namespace = own.namespace_pattern
    words, counts = f"{kafka_prefix}-words", f"{kafka_prefix}-counts"
    apply(
        kube,
        topic(words, namespace, partitions=3, **REPLICATED),
        table(
            counts, namespace, partitions=3, valueSchema="word STRING, count BIGINT", **REPLICATED
        ),
    )
    for kind, name in (("topic", words), ("table", counts)):
        wait_condition(kube, kind, name, namespace, timeout=90)
    admin = AdminClient({"bootstrap.servers": three_brokers.bootstrap})
    wait_for(
        lambda: all(_in_sync(admin, name) for name in (words, counts, CLAIMS)),
        timeout=60,
        what="ISRs",
    )
    lost = admin.list_topics(topic=CLAIMS, timeout=10).topics[CLAIMS].partitions[0].leader

    documents = rt.load_manifests(MANIFEST.format(words=words, counts=counts))
    spec = rt.build_spec(
        documents,
        bootstrap=three_brokers.bootstrap,
        checkpoint=tmp_path / "ck",
        available_now=False,
    )
    batches: list[progress.BatchProgress] = []
    producer = PacedProducer(three_brokers.bootstrap, words)
    with rt.running(spec, on_batch=[batches.append]) as driver:
        producer.start()
        wait_for(lambda: producer.sent >= RECORDS // 3, timeout=120, what="a third produced")
        three_brokers.kill(lost)
        batches_at_loss = len(batches)

        def ready_through_resyncs() -> bool:
            for kind, name in (("topic", words), ("table", counts)):
                ready = condition(get(kube, kind, name, namespace), "Ready")
                assert ready.get("status") == "True", (
                    f"{kind} {name} while a broker is down: {ready}"
                )
            return not producer.is_alive()

        wait_for(ready_through_resyncs, timeout=180, interval=2, what="the producer to finish")
        assert not producer.failed, producer.failed[:3]
        assert sum(producer.acknowledged.values()) == RECORDS
        wait_for(
            lambda: table_counts(three_brokers.bootstrap, counts) == dict(producer.acknowledged),
            timeout=180,
            interval=3,
            what="the Table to equal every acknowledged word, one broker down",
        )
        batches_during_loss = len(batches) - batches_at_loss
        assert batches_during_loss > 0
        assert driver.failure() is None

        three_brokers.revive(lost)
        wait_for(
            lambda: _in_sync(admin, words) and _in_sync(admin, counts),
            timeout=120,
            what="three in-sync replicas again",
        )
        assert table_counts(three_brokers.bootstrap, counts) == dict(producer.acknowledged)
        assert driver.failure() is None
    measurement(
        f"{RECORDS} words acknowledged, 0 failed; {batches_at_loss} batches before the loss, "
        f"{batches_during_loss} with broker {lost} (the claims' leader) down; Table exact before "
        "and after it came back"
    )


MANIFEST = """
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {{name: words}}
spec: {{partitions: 3, topicName: {words}}}
---
apiVersion: rillet.io/v1alpha1
kind: Table
metadata: {{name: counts}}
spec:
  partitions: 3
  topicName: {counts}
  valueSchema: "word STRING, count BIGINT"
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata: {{name: counter}}
spec:
  image: rillet/spark-runtime:0.1.0
  inputs:
    - name: words
      topicRef: {{name: words}}
      format: string
      startingOffsets: earliest
  pipeline:
    sql: COUNT_WORDS
  outputs:
    - tableRef: {{name: counts}}
      keyColumns: [word]
""".replace("COUNT_WORDS", COUNT_WORDS)
