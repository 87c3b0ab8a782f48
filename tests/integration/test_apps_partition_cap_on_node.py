"""The partition cap where it binds, on the stack's node: never one executor past the partitions.

Rillet's core promise, checked against the executor pods themselves (what Spark really started),
not against the status the operator writes. The App asks for more than its input can keep busy:
`minExecutors: 3` and a lag worth many executors, on a 2-partition input. From the moment the
App is created, a sampler lists its executor pods every second.

Test plan:
- the App starts with a large lag: its executor pods reach 2 and never 3, from the driver's first
  second (the initial count Spark starts with is within the cap, not minExecutors);
- the driver pod is deleted: the new driver starts, and again never more than 2 executor pods;
- the status says the cap is 2, bound by the input's partitions, and why the count is not 3;
- a stateful word count whose input grows from 2 to 6 partitions: its state keeps the 2
  partitions its checkpoint froze (status.statePartitions, from what Spark reports), the cap
  follows the widest stage (the read of 6 partitions: capBy InputPartitions), and its Table stays
  exact (the counts of every word the test wrote, before and after the growth).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from .conftest import Kube
from .objects import apply, get, topic, wait_condition
from .polling import wait_for
from .test_apps_scaling_on_node import copying_app, pods, produce
from .wordcounts import COUNT_WORDS, names, produce_lines, wait_table, word_count

pytestmark = pytest.mark.usefixtures("operator")

PARTITIONS = 2
# 30,000 records at lagTarget 1,000 want 30 executors; minExecutors wants 3: both past the cap.
RECORDS = 30_000
SCALING = {"minExecutors": 3, "maxExecutors": 6, "lagTarget": 1000}


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


def test_executor_pods_never_pass_the_partitions_from_the_first_second(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    kafka_bootstrap: str,
    runtime_image: str,
    sampler: PodSampler,
    measurement: Callable[[str], None],
) -> None:
    source, target, name = f"{kafka_prefix}-in", f"{kafka_prefix}-out", f"{kafka_prefix}-cap"
    apply(
        kube,
        topic(source, namespace, partitions=PARTITIONS),
        topic(target, namespace, partitions=PARTITIONS),
    )
    wait_condition(kube, "topic", source, namespace, timeout=60)
    produce(kafka_bootstrap, source, RECORDS)
    app = copying_app(name, namespace, runtime_image, source=source, target=target)
    app["spec"]["scaling"] = SCALING
    apply(kube, app)
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
    sampler.stop()
    measurement(
        f"{len(sampler.counts)} samples of executor pods over {time.monotonic() - started:.0f} s: "
        f"most {sampler.most()} (cap {PARTITIONS}, minExecutors {SCALING['minExecutors']})"
    )
    assert_within_cap(sampler, started)


def assert_within_cap(sampler: PodSampler, started: float) -> None:
    """Every sample so far at most PARTITIONS pods, sampled about once a second."""
    assert not sampler.failures, sampler.failures
    # A sample every 3 s at least (listing pods takes longer than a second under load).
    assert len(sampler.counts) >= (time.monotonic() - started) / 3, len(sampler.counts)
    over = [(round(at - started), count) for at, count in sampler.counts if count > PARTITIONS]
    assert not over, f"executor pods past the {PARTITIONS} partitions (s after apply, pods): {over}"


def test_a_stateful_app_grown_past_its_state_partitions_says_what_binds_and_stays_exact(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    kafka_bootstrap: str,
    runtime_image: str,
    measurement: Callable[[str], None],
) -> None:
    app, lines, counts = names(kafka_prefix)
    documents = word_count(
        app, namespace, image=runtime_image, reads=lines, writes=counts, sql=COUNT_WORDS
    )
    documents[0]["spec"]["partitions"] = PARTITIONS  # the Table follows its writer's inputs
    apply(kube, *documents)
    truth = produce_lines(kafka_bootstrap, lines, 3_000, seed=34)
    wait_table(kafka_bootstrap, counts, truth, timeout=400)

    kube.kubectl(
        "patch",
        "topic",
        lines,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec": {"partitions": 6}}',
    )
    wait_condition(kube, "table", counts, namespace, timeout=60)
    truth += produce_lines(kafka_bootstrap, lines, 3_000, seed=35)
    wait_table(kafka_bootstrap, counts, truth, timeout=400)

    status = wait_for(
        lambda: (
            (found := get(kube, "app", app, namespace)["status"]).get("partitions") == 6
            and found.get("statePartitions")
            and found
        ),
        timeout=60,
        what="the App's status to show 6 input partitions and its state's",
    )
    measurement(
        f"grown to {status['partitions']} input partitions: statePartitions "
        f"{status['statePartitions']}, executors {status['executors']}, Table exact "
        f"({sum(truth.values())} words)"
    )
    assert status["statePartitions"] == PARTITIONS, status
    assert (status["executors"]["cap"], status["executors"]["capBy"]) == (6, "InputPartitions")
