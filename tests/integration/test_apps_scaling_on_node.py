"""Live executor scaling of an App running for real on the stack's node: no restart.

Needs the stack's worker node and its runtime image (fails without them). The App is
stateless (records copied from one Topic to another), so it needs no storage shared by the
driver and its executors, and slow on purpose (2 ms per record, Java's Thread.sleep through
Spark SQL's reflect): a burst stays lag for the seconds scaling needs to see it, instead of
being drained in one quick batch.

Test plan:
- the App runs: driver and executor pods Running, the App Ready (phase Running), its progress
  (Spark application id) read from the driver's annotation;
- its input Topic grows from 2 to 6 partitions: the cap follows within seconds;
- a burst of records: the desired count rises to min(maxExecutors, cap) and that many executor
  pods run, with the same driver pod (uid) and the same Spark application: no restart; the
  count never passes the cap;
- the lag drained, the count returns to minExecutors after the stabilization window, and the
  executor pods go; the ExecutorsScaled Events go up, then down, never back and forth;
- every record is copied (at least once);
- deleting the App removes its pods, executors included.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from rillet_devstack import installs

from .conftest import Kube
from .objects import apply, events, get, topic, wait_condition
from .polling import wait_for
from .wordcounts import C1_ONLY

pytestmark = pytest.mark.usefixtures("operator")

RECORDS = 40_000
SLEEP_MS = 2  # per record (installs.slow_copy_sql)
SCALING = {
    "minExecutors": 1,
    "maxExecutors": 4,
    "lagTarget": 2000,
    "stabilizationWindowSeconds": 15,
}


def copying_app(
    name: str, namespace: str, image: str, *, source: str, target: str
) -> dict[str, Any]:
    # Small requests (installs.NODE_*): the driver and four executors share the node's two CPUs.
    return installs.copying_app(
        name,
        namespace,
        image,
        source=source,
        target=target,
        sleep_ms=SLEEP_MS,
        scaling=SCALING,
        spark_conf=C1_ONLY,
    )


def pods(kube: Kube, namespace: str, role: str) -> list[dict[str, Any]]:
    return kube.api.list("pod", namespace, labels=f"rillet.io/role={role}")


def running(kube: Kube, namespace: str, role: str) -> int:
    return sum(1 for pod in pods(kube, namespace, role) if pod["status"].get("phase") == "Running")


def driver(kube: Kube, namespace: str) -> tuple[str, str | None]:
    """The driver pod's uid and Spark application id (from its progress annotation)."""
    (pod,) = pods(kube, namespace, "driver")
    progress = json.loads(pod["metadata"].get("annotations", {}).get("rillet.io/progress", "{}"))
    return pod["metadata"]["uid"], progress.get("applicationId")


def produce(bootstrap: str, topic_name: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(count):
        producer.produce(topic_name, value=f"line {i}".encode())
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def records_in(admin: AdminClient, topic_name: str) -> int:
    partitions = admin.list_topics(topic_name, timeout=10).topics[topic_name].partitions
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    request = {TopicPartition(topic_name, p): latest for p in partitions}
    return sum(f.result(timeout=30).offset for f in admin.list_offsets(request).values())


def scale_series(found: list[dict[str, Any]]) -> list[int]:
    """The executor counts the ExecutorsScaled Events went through, in order."""
    scaled = sorted(
        (e for e in found if e["reason"] == "ExecutorsScaled"),
        key=lambda e: e.get("lastTimestamp") or e["metadata"]["creationTimestamp"],
    )
    counts = []
    for event in scaled:
        change = event["message"].split(":", 1)[0].removeprefix("executors ")
        counts.append(int(change.rsplit(" to ", 1)[-1]))
    return counts


def executors_of(kube: Kube, name: str, namespace: str) -> dict[str, Any]:
    return dict(get(kube, "app", name, namespace).get("status", {}).get("executors") or {})


def test_executors_scale_live_with_partitions_and_lag(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    kafka_bootstrap: str,
    kafka_admin: AdminClient,
    runtime_image: str,
    measurement: Callable[[str], None],
) -> None:
    source, target, name = f"{kafka_prefix}-lines", f"{kafka_prefix}-copies", f"{kafka_prefix}-cp"
    apply(
        kube,
        topic(source, namespace, partitions=2),
        topic(target, namespace, partitions=2),
        copying_app(name, namespace, runtime_image, source=source, target=target),
    )
    wait_condition(kube, "app", name, namespace, timeout=300)
    wait_for(lambda: running(kube, namespace, "executor") == 1, timeout=120, what="one executor")
    uid, application = wait_for(
        lambda: (found := driver(kube, namespace))[1] and found,
        timeout=60,
        what="the driver's progress annotation",
    )

    grown = time.monotonic()
    kube.kubectl(
        "patch",
        "topic",
        source,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec": {"partitions": 6}}',
    )
    wait_for(
        lambda: executors_of(kube, name, namespace).get("cap") == 6,
        timeout=30,
        what="the cap raised to 6",
    )
    measurement(f"cap raised {time.monotonic() - grown:.1f} s after the Topic grew to 6 partitions")

    burst = time.monotonic()
    produce(kafka_bootstrap, source, RECORDS)
    seen: list[dict[str, Any]] = []

    def scaled_up() -> bool:
        seen.append(executors_of(kube, name, namespace))
        return running(kube, namespace, "executor") == SCALING["maxExecutors"]

    wait_for(scaled_up, timeout=180, interval=1, what="4 executor pods Running")
    measurement(f"4 executors Running {time.monotonic() - burst:.1f} s after the burst began")
    assert driver(kube, namespace) == (uid, application)  # no restart

    def scaled_down() -> bool:
        status = get(kube, "app", name, namespace)["status"]
        seen.append(status.get("executors") or {})
        return status.get("lag") == 0 and running(kube, namespace, "executor") == 1

    wait_for(scaled_down, timeout=300, interval=1, what="back to 1 executor once drained")
    assert driver(kube, namespace) == (uid, application)
    assert all(e.get("desired", 0) <= e.get("cap", 6) for e in seen), seen
    assert all(e.get("ready", 0) <= 6 for e in seen), seen
    # Up to the count the cap and maxExecutors allow, and down again, without flapping.
    counts = scale_series(events(kube, namespace, name))
    peak = counts.index(max(counts))
    assert max(counts) == SCALING["maxExecutors"], counts
    assert counts[: peak + 1] == sorted(counts[: peak + 1]), counts
    assert counts[peak:] == sorted(counts[peak:], reverse=True), counts
    assert counts[-1] == SCALING["minExecutors"], counts
    assert records_in(kafka_admin, target) >= RECORDS

    kube.kubectl("delete", "app", name, "-n", namespace)
    wait_for(
        lambda: not pods(kube, namespace, "driver") and not pods(kube, namespace, "executor"),
        timeout=180,
        what="the App's pods gone with it",
    )
