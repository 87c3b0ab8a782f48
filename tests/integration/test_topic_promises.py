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
- Retain, over time: a Retain Topic holding records is deleted; then its operator resyncs
  several times, is restarted (SIGTERM, then SIGKILL), and a new Topic of the same name (Retain
  by default) adopts the topic and is deleted too. A thread of the test samples Kafka every
  second all along (the topic's id and its records, by watermarks): the same topic, every
  record in it, at every sample; and at the end a consumer reads the very records produced.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from rillet_devstack.operating import OperatorProcess

from .conftest import Kube
from .kafka_reads import kafka_overrides, kafka_partitions, kafka_topic_id
from .objects import apply, condition, events, exists, get, topic, wait_condition
from .polling import wait_for
from .scraping import metric, serving

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


RETAINED = 200  # records in the retained topic
RETAINED_PARTITIONS = 2


@dataclass
class _Sample:
    """One look at the retained topic, `at` seconds into the watch, during `phase`."""

    at: float
    phase: str
    topic_id: str | None  # None: Kafka holds no such topic
    records: int | None  # None: Kafka could not say (the error is in `error`)
    error: str = ""


@dataclass
class _TopicWatch:
    """Samples a Kafka topic every second from a thread of its own, with Kafka clients of its
    own: the topic's id (a topic deleted and made again has a new one) and how many records it
    holds (high less low watermark, summed: its producer wrote no transaction markers)."""

    bootstrap: str
    name: str
    phase: str = "the Topic deleted"
    samples: list[_Sample] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": f"test.{uuid.uuid4().hex}"}
        )
        started = time.monotonic()
        try:
            while not self.stop.is_set():
                self.samples.append(self._sample(admin, consumer, time.monotonic() - started))
                self.stop.wait(1.0)
        finally:
            consumer.close()

    def _sample(self, admin: AdminClient, consumer: Consumer, at: float) -> _Sample:
        phase = self.phase
        try:
            topic_id = kafka_topic_id(admin, self.name)
            if topic_id is None:
                return _Sample(at, phase, None, None, "no such topic")
            records = 0
            for partition in range(RETAINED_PARTITIONS):
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(self.name, partition), timeout=10, cached=False
                )
                records += high - low
        except (KafkaException, TimeoutError) as error:
            return _Sample(at, phase, None, None, repr(error))
        return _Sample(at, phase, topic_id, records)


@contextlib.contextmanager
def _watching(bootstrap: str, name: str) -> Iterator[_TopicWatch]:
    watch = _TopicWatch(bootstrap, name)
    thread = threading.Thread(target=watch.run, name="retained-topic-watch", daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        watch.stop.set()
        thread.join(timeout=60)


def _produce_numbered(bootstrap: str, name: str) -> list[str]:
    """RETAINED records, each value once (idempotent: a retried send adds no copy)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    values = [f"retained-{i:04d}" for i in range(RETAINED)]
    for i, value in enumerate(values):
        producer.produce(name, value=value.encode(), partition=i % RETAINED_PARTITIONS)
    assert producer.flush(30) == 0
    return values


def _read_values(bootstrap: str, name: str) -> list[str]:
    """Every value of the topic, read from the start by a consumer of the test's own."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test.{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1]
            for p in range(RETAINED_PARTITIONS)
        }
        consumer.assign([TopicPartition(name, p, 0) for p in range(RETAINED_PARTITIONS)])
        values: list[str] = []
        deadline = time.monotonic() + 60
        while any(
            tp.offset < ends[tp.partition]
            for tp in consumer.position([TopicPartition(name, p) for p in ends])
        ):
            assert time.monotonic() < deadline, f"read {len(values)} records of {name} in 60 s"
            for message in consumer.consume(num_messages=500, timeout=2):
                assert message.error() is None, message.error()
                values.append((message.value() or b"").decode())
        return values
    finally:
        consumer.close()


def _resync_passes(operator: OperatorProcess, count: int) -> None:
    """Wait for `count` resync passes of the operator to start from now (each takes every
    object of its namespace and reads Kafka)."""
    wait_for(lambda: serving(operator), timeout=60, what="the operator's metrics endpoint")
    start = metric(operator, "rillet_resyncs_total")
    wait_for(
        lambda: metric(operator, "rillet_resyncs_total") >= start + count,
        timeout=60,
        interval=0.5,
        what=f"{count} resync passes",
    )


def test_a_retained_topic_keeps_its_records_through_resyncs_restarts_and_a_successor(
    kube: Kube,
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    lone_operator: Callable[..., OperatorProcess],
    measurement: Callable[[str], None],
) -> None:
    own = lone_operator()  # resyncs every 3 s, as the session's operator does
    own.start()
    namespace = own.namespace_pattern
    name = f"{kafka_prefix}-retained"
    apply(kube, topic(name, namespace, partitions=RETAINED_PARTITIONS, deletionPolicy="Retain"))
    wait_condition(kube, "topic", name, namespace, reason="TopicReady")
    produced = _produce_numbered(kafka_bootstrap, name)
    original = kafka_topic_id(kafka_admin, name)
    assert original is not None
    with _watching(kafka_bootstrap, name) as watch:
        # No finalizer on a Retain Topic: the object goes at once, with or without an operator.
        kube.kubectl("delete", "topic", name, "-n", namespace, "--timeout=60s")
        assert not exists(kube, "topic", name, namespace)
        _resync_passes(own, 5)
        watch.phase = "the operator stopped (SIGTERM) and started again"
        own.restart()
        _resync_passes(own, 3)
        watch.phase = "the operator killed (SIGKILL) and started again"
        own.kill()
        own.start()
        _resync_passes(own, 3)
        watch.phase = "a new Topic of the same name"
        apply(kube, topic(name, namespace, partitions=RETAINED_PARTITIONS))
        wait_condition(kube, "topic", name, namespace, reason="TopicReady")
        assert get(kube, "topic", name, namespace)["spec"]["deletionPolicy"] == "Retain"
        _resync_passes(own, 2)
        watch.phase = "the new Topic deleted"
        kube.kubectl("delete", "topic", name, "-n", namespace, "--timeout=60s")
        _resync_passes(own, 5)

    samples = watch.samples
    wrong = [s for s in samples if s.topic_id != original or s.records != RETAINED]
    assert not wrong, f"of {len(samples)} samples, not the topic with its {RETAINED} records: " + (
        "; ".join(f"{s.at:.0f} s ({s.phase}): {s.topic_id} {s.records} {s.error}" for s in wrong)
    )
    phases = {s.phase for s in samples}
    assert len(phases) == 5, f"a phase went unsampled: {sorted(phases)}"
    gaps = [b.at - a.at for a, b in itertools.pairwise(samples)]
    assert max(gaps) < 5, f"the watch looked away for {max(gaps):.1f} s"
    assert sorted(_read_values(kafka_bootstrap, name)) == produced
    deleted = [e for e in events(kube, namespace, name) if e["reason"] == "TopicDeleted"]
    assert not deleted, deleted
    measurement(
        f"retained topic sampled {len(samples)} times over {samples[-1].at:.0f} s "
        f"(resyncs, 2 operator restarts, a successor Topic deleted): kept, {RETAINED} records"
    )
