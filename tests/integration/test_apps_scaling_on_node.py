"""Live executor scaling of an App running for real on the stack's node, and the partition cap
where it binds: never one executor pod past the partitions, and no restart to scale.

Needs the stack's worker node and its runtime image (fails without them). The App is
stateless (records copied from one Topic to another), so it needs no storage shared by the
driver and its executors, and slow on purpose (2 ms per record, Java's Thread.sleep through
Spark SQL's reflect): a burst stays lag for the seconds scaling needs to see it, instead of
being drained in one quick batch. The cap is checked against the executor pods themselves (what
Spark really started), not against the status the operator writes: from the moment the App is
created, a sampler lists its executor pods every second.

Test plan, one App (Spark started once, then once more for the deleted driver):
- it starts on a 2-partition input with a lag worth many executors and `minExecutors: 3`: its
  executor pods reach 2 and never 3, from the driver's first second (the initial count Spark
  starts with is within the cap, not minExecutors); the status says the cap is 2, bound by the
  input's partitions;
- the driver pod is deleted: the new driver starts, and again never more than 2 executor pods;
- its first records drained, its input Topic grows from 2 to 6 partitions: the cap follows
  within seconds, and the count rises to minExecutors, no longer held by the cap;
- a burst of records: the count rises to maxExecutors (within the new cap) and that many executor
  pods run, with the same driver pod (uid) and the same Spark application: no restart;
- the lag drained, the count returns to minExecutors after the stabilization window, and the
  executor pods go; the ExecutorsScaled Events go up, then down, never back and forth;
- every record is copied (at least once);
- deleting the App removes its pods, executors included.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
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

PARTITIONS = 2
# 8,000 records at lagTarget 1,000 want 8 executors; minExecutors wants 3: both past the cap.
LAG = 8_000
# Over 6 partitions: wants all 4 executors (maxExecutors), busy for some 12 s at 4.
BURST = 24_000
SLEEP_MS = 2  # per record (installs.slow_copy_sql)
SCALING = {
    "minExecutors": 3,
    "maxExecutors": 4,
    "lagTarget": 1000,
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


def produce(bootstrap: str, topic_name: str, count: int, *, partitions: int) -> None:
    """`count` records spread evenly over the partitions: every executor gets its share, so the
    lag drains at the pace of all of them (the sticky partitioner fills a few partitions)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(count):
        producer.produce(topic_name, value=f"line {i}".encode(), partition=i % partitions)
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


@dataclass
class PodSampler:
    """Counts an App's live executor pods (not being deleted) once a second, in a thread."""

    kube: Kube
    namespace: str
    counts: list[tuple[float, int]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def live(self) -> int:
        found = pods(self.kube, self.namespace, "executor")
        return sum(1 for pod in found if not pod["metadata"].get("deletionTimestamp"))

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self.counts.append((time.monotonic(), self.live()))
            except Exception as error:  # a missed sample is reported, not hidden
                self.failures.append(repr(error))
            self._stop.wait(1.0)

    def most(self) -> int:
        return max((count for _, count in self.counts), default=0)

    def stop(self) -> None:
        self._stop.set()


@pytest.fixture
def sampler(kube: Kube, namespace: str) -> Iterator[PodSampler]:
    found = PodSampler(kube, namespace)
    thread = threading.Thread(target=found.run, name="executor-pod-sampler", daemon=True)
    thread.start()
    yield found
    found.stop()
    thread.join(timeout=10)


def driver_uid(kube: Kube, namespace: str) -> str | None:
    running = [p for p in pods(kube, namespace, "driver") if p["status"].get("phase") == "Running"]
    return running[0]["metadata"]["uid"] if len(running) == 1 else None


def assert_within_cap(sampler: PodSampler, started: float) -> None:
    """Every sample so far at most PARTITIONS pods, sampled about once a second."""
    assert not sampler.failures, sampler.failures
    # A sample every 3 s at least (listing pods takes longer than a second under load).
    assert len(sampler.counts) >= (time.monotonic() - started) / 3, len(sampler.counts)
    over = [(round(at - started), count) for at, count in sampler.counts if count > PARTITIONS]
    assert not over, f"executor pods past the {PARTITIONS} partitions (s after apply, pods): {over}"


def test_executors_scale_live_with_lag_and_never_pass_the_partitions(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    kafka_bootstrap: str,
    kafka_admin: AdminClient,
    runtime_image: str,
    sampler: PodSampler,
    measurement: Callable[[str], None],
) -> None:
    source, target, name = f"{kafka_prefix}-lines", f"{kafka_prefix}-copies", f"{kafka_prefix}-cp"
    apply(
        kube,
        topic(source, namespace, partitions=PARTITIONS),
        topic(target, namespace, partitions=PARTITIONS),
    )
    wait_condition(kube, "topic", source, namespace, timeout=60)
    produce(kafka_bootstrap, source, LAG, partitions=PARTITIONS)
    apply(kube, copying_app(name, namespace, runtime_image, source=source, target=target))
    started = time.monotonic()
    _within_the_partitions_from_the_first_second(kube, namespace, name, sampler, measurement)
    uid, application = wait_for(
        lambda: (found := driver(kube, namespace))[1] and found,
        timeout=60,
        what="the driver's progress annotation",
    )
    sampler.stop()
    measurement(
        f"{len(sampler.counts)} samples of executor pods over {time.monotonic() - started:.0f} s: "
        f"most {sampler.most()} (cap {PARTITIONS}, minExecutors {SCALING['minExecutors']})"
    )
    assert_within_cap(sampler, started)

    # The first records drained: the next rise of the count is the burst's alone.
    wait_for(
        lambda: get(kube, "app", name, namespace)["status"].get("lag") == 0,
        timeout=120,
        what="the first records drained",
    )
    _grow_to_six_partitions(kube, namespace, source, name, measurement)
    wait_for(
        lambda: executors_of(kube, name, namespace).get("desired") == SCALING["minExecutors"],
        timeout=30,
        what="minExecutors wanted, the cap no longer binding",
    )
    burst = time.monotonic()
    produce(kafka_bootstrap, source, BURST, partitions=6)
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
        return status.get("lag") == 0 and running(kube, namespace, "executor") == 3

    wait_for(scaled_down, timeout=300, interval=1, what="back to 3 executors once drained")
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
    assert records_in(kafka_admin, target) >= LAG + BURST

    kube.kubectl("delete", "app", name, "-n", namespace)
    wait_for(
        lambda: not pods(kube, namespace, "driver") and not pods(kube, namespace, "executor"),
        timeout=180,
        what="the App's pods gone with it",
    )


def _within_the_partitions_from_the_first_second(
    kube: Kube,
    namespace: str,
    name: str,
    sampler: PodSampler,
    measurement: Callable[[str], None],
) -> None:
    """Executor pods reach the partitions and never pass them, with a driver made anew too."""
    started = time.monotonic()
    wait_for(
        lambda: sampler.live() == PARTITIONS and driver_uid(kube, namespace),
        timeout=300,
        interval=1,
        what=f"{PARTITIONS} executor pods beside a running driver",
    )
    measurement(f"{PARTITIONS} executor pods {time.monotonic() - started:.0f} s after apply")
    assert_within_cap(sampler, started)
    first = driver_uid(kube, namespace)
    status = get(kube, "app", name, namespace)["status"]
    executors = status.get("executors") or {}
    assert (executors.get("cap"), executors.get("capBy")) == (PARTITIONS, "InputPartitions")
    assert executors.get("desired") == PARTITIONS, status

    # A new driver (the StatefulSet recreates its pod) starts its executors within the cap too.
    kube.kubectl("delete", "pod", "-n", namespace, "-l", "rillet.io/role=driver", "--wait=false")
    wait_for(
        lambda: driver_uid(kube, namespace) not in (None, first) and sampler.live() == PARTITIONS,
        timeout=300,
        interval=1,
        what=f"a new driver with {PARTITIONS} executor pods",
    )
    wait_condition(kube, "app", name, namespace, timeout=300)


def _grow_to_six_partitions(
    kube: Kube, namespace: str, source: str, name: str, measurement: Callable[[str], None]
) -> None:
    grown = time.monotonic()
    patch = '{"spec": {"partitions": 6}}'
    kube.kubectl("patch", "topic", source, "-n", namespace, "--type=merge", "-p", patch)
    wait_for(
        lambda: executors_of(kube, name, namespace).get("cap") == 6,
        timeout=30,
        what="the cap raised to 6",
    )
    measurement(f"cap raised {time.monotonic() - grown:.1f} s after the Topic grew to 6 partitions")
