"""A driver rolled by a spec change, on the node, repeats nothing: the promise of docs/runtime.md
("SIGTERM stops at the end of a batch (a spec change rolls the driver that way)") and
docs/upgrading.md ("a rolling restart repeats nothing"), for an exactly-once Topic output.

The App copies each record of its input to an ExactlyOnce Topic output. The test's producer
(idempotent: a retried send adds no copy) writes numbered records all along; the acknowledged
ones are the ground truth. Batches run back to back, a few hundred records each, so that the
roll lands among batches being written.

Test plan:
- while records flow in and the first driver copies them, the App's SQL is changed to an
  equivalent query (WHERE value IS NOT NULL: every record has one): the spec hash changes, and
  the StatefulSet replaces the driver pod (a new uid);
- records keep flowing while the new driver takes over, and it copies them too;
- once the App's consumer group has committed the input's end offsets, a read_committed
  consumer of the test's own finds every produced record in the output exactly once: none
  twice, none missing, nothing else.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from rillet.tables import watermarks

from . import podlogs
from .conftest import Kube
from .objects import apply, get, topic, wait_condition
from .polling import wait_for
from .runtime_helpers import committed_offsets, end_offsets
from .wordcounts import C1_ONLY, SMALL, driver_running

pytestmark = pytest.mark.usefixtures("operator")

PARTITIONS = 2
BACKLOG = 1_000  # records before the App starts: its first batches have work at once
PER_TICK = 20  # then this many records every TICK seconds (80 a second)
TICK = 0.25
SQL = "SELECT value FROM records"
# The same records, a different text: the run spec's SQL is hashed, so the driver rolls.
EQUIVALENT_SQL = "SELECT value FROM records WHERE value IS NOT NULL"
SPEC_HASH = "rillet.io/spec-hash"


def copying_app(
    name: str, namespace: str, image: str, *, source: str, target: str
) -> dict[str, Any]:
    return {
        "apiVersion": "rillet.io/v1alpha1",
        "kind": "App",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "image": image,
            "inputs": [
                {
                    "name": "records",
                    "topicRef": {"name": source},
                    "format": "string",
                    "startingOffsets": "earliest",
                    "maxOffsetsPerTrigger": 200,
                }
            ],
            "pipeline": {"sql": SQL},
            "outputs": [
                {
                    "topicRef": {"name": target},
                    "valueColumns": ["value"],
                    "valueFormat": "string",
                    "delivery": "ExactlyOnce",
                }
            ],
            "scaling": {"minExecutors": 1, "maxExecutors": 1},
            "driver": SMALL,
            "executor": SMALL,
            "sparkConf": C1_ONLY,
        },
    }


@dataclass
class _Stream:
    """Numbered records produced from a thread of the test's own; `acknowledged` holds those
    Kafka confirmed (the ground truth), `failed` the errors of any it did not."""

    bootstrap: str
    topic: str
    acknowledged: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self) -> int:
        with self._lock:
            return len(self.acknowledged)

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        with self._lock:
            if error is None:
                self.acknowledged.append((message.value() or b"").decode())
            else:
                self.failed.append(str(error))

    def run(self) -> None:
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )
        sent = 0

        def send(count: int) -> None:
            nonlocal sent
            for _ in range(count):
                value = f"record-{sent:07d}"
                producer.produce(
                    self.topic,
                    value=value.encode(),
                    partition=sent % PARTITIONS,
                    on_delivery=self._delivered,
                )
                sent += 1
            producer.poll(0)

        send(BACKLOG)
        while not self.stop.wait(TICK):
            send(PER_TICK)
        producer.flush(60)


@contextlib.contextmanager
def _streaming(bootstrap: str, topic_name: str) -> Iterator[_Stream]:
    """Records flowing into `topic_name` until the block ends (then every one is flushed)."""
    stream = _Stream(bootstrap, topic_name)
    thread = threading.Thread(target=stream.run, name="roll-test-producer", daemon=True)
    thread.start()
    try:
        yield stream
    finally:
        stream.stop.set()
        thread.join(timeout=90)
    assert not thread.is_alive(), "the producer did not flush within 90 s"


def committed_values(bootstrap: str, topic_name: str, *, timeout: float = 60) -> list[str]:
    """Every value of `topic_name` a read_committed consumer sees, up to the last stable offsets
    (an open transaction's records are not read yet, an aborted one's never)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test.{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        # With read_committed, the high watermark Kafka answers is the last stable offset.
        ends = {
            p: watermarks.watermarks(consumer, topic_name, p, timeout=10)[1]
            for p in range(PARTITIONS)
        }
        consumer.assign([TopicPartition(topic_name, p, 0) for p in range(PARTITIONS)])
        values: list[str] = []
        deadline = time.monotonic() + timeout
        # Positions, not a count of records: each transaction's commit marker takes an offset.
        while any(
            position.offset < ends[position.partition]
            for position in consumer.position([TopicPartition(topic_name, p) for p in ends])
        ):
            assert time.monotonic() < deadline, f"read {len(values)} of {topic_name} to {ends}"
            for message in consumer.consume(num_messages=5000, timeout=1):
                assert message.error() is None, message.error()
                values.append((message.value() or b"").decode())
        return values
    finally:
        consumer.close()


def _a_new_driver(kube: Kube, namespace: str, old_uid: str) -> Callable[[], Any]:
    def probe() -> Any:
        found = driver_running(kube, namespace)()
        return found if found and found["metadata"]["uid"] != old_uid else None

    return probe


def test_a_driver_rolled_by_a_spec_change_repeats_nothing(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    runtime_image: str,
    kafka_bootstrap: str,
    measurement: Callable[[str], None],
    tmp_path: Path,
) -> None:
    app, source, target = f"{kafka_prefix}-copy", f"{kafka_prefix}-in", f"{kafka_prefix}-out"
    apply(
        kube,
        topic(source, namespace, partitions=PARTITIONS, deletionPolicy="Delete"),
        topic(target, namespace, partitions=PARTITIONS, deletionPolicy="Delete"),
    )
    for name in (source, target):
        wait_condition(kube, "topic", name, namespace, reason="TopicReady")
    with _streaming(kafka_bootstrap, source) as stream:
        apply(kube, copying_app(app, namespace, runtime_image, source=source, target=target))
        first = wait_for(
            driver_running(kube, namespace), timeout=240, interval=2, what="the first driver"
        )
        # The first driver is copying: its output grows from one look to the next.
        copied = wait_for(
            lambda: len(committed_values(kafka_bootstrap, target)),
            timeout=180,
            interval=1,
            what="the first driver's first copies",
        )
        wait_for(
            lambda: len(committed_values(kafka_bootstrap, target)) > copied,
            timeout=60,
            interval=0.5,
            what="the first driver still copying",
        )
        log = tmp_path / "first-driver.log"
        with podlogs.following(kube, namespace, first["metadata"]["name"], log):
            change = [{"op": "replace", "path": "/spec/pipeline/sql", "value": EQUIVALENT_SQL}]
            kube.kubectl(
                "patch", "app", app, "-n", namespace, "--type=json", "-p", json.dumps(change)
            )
            rolled_at = time.monotonic()
            at_roll = len(committed_values(kafka_bootstrap, target))
            assert at_roll < stream.count(), "the first driver had nothing left to copy at the roll"
            second = wait_for(
                _a_new_driver(kube, namespace, first["metadata"]["uid"]),
                timeout=240,
                interval=1,
                what="a new driver pod Running",
            )
            took = time.monotonic() - rolled_at
        first_log = log.read_text(errors="replace")
        assert podlogs.GRACEFUL_STOP in first_log, first_log[-3000:]
        annotations = (first["metadata"]["annotations"], second["metadata"]["annotations"])
        assert annotations[0][SPEC_HASH] != annotations[1][SPEC_HASH], "not rolled by the spec"
        # The new driver copies records too (the first one's pod is gone: a StatefulSet of one).
        handed_over = len(committed_values(kafka_bootstrap, target))
        wait_for(
            lambda: len(committed_values(kafka_bootstrap, target)) > handed_over,
            timeout=180,
            interval=1,
            what="the new driver's first copies",
        )
    assert not stream.failed, f"the producer lost records: {stream.failed[:3]}"
    produced = Counter(stream.acknowledged)
    assert max(produced.values()) == 1

    group = f"rillet.{namespace}.{app}"
    ends = end_offsets(kafka_bootstrap, source)
    wait_for(
        lambda: committed_offsets(kafka_bootstrap, group, source, PARTITIONS) == ends,
        timeout=180,
        interval=2,
        what=f"group {group} to commit the input's end offsets {ends}",
    )
    copies = Counter(committed_values(kafka_bootstrap, target))
    twice = sorted(value for value, seen in copies.items() if seen > 1)
    missing = sorted(set(produced) - set(copies))
    foreign = sorted(set(copies) - set(produced))
    assert not twice, f"{len(twice)} records copied more than once, e.g. {twice[:5]}"
    assert not missing, f"{len(missing)} records never copied, e.g. {missing[:5]}"
    assert not foreign, f"{len(foreign)} values in the output never produced: {foreign[:5]}"
    # Rolled once, by the spec: the new driver neither crashed nor was replaced meanwhile.
    driver = get(kube, "pod", second["metadata"]["name"], namespace)
    assert driver["metadata"]["uid"] == second["metadata"]["uid"], "the new driver was replaced"
    restarts = driver["status"]["containerStatuses"][0]["restartCount"]
    assert restarts == 0, f"the new driver's container restarted {restarts} times"
    measurement(
        f"driver rolled by a SQL change after {at_roll} of {len(produced)} records copied, "
        f"new driver Running {took:.0f} s after the change (the first stopped on SIGTERM"
        f"{', forced after its timeout' if 'still busy after' in first_log else ''}): "
        "each record copied once"
    )
