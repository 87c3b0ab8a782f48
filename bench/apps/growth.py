"""growth: executors following a Topic grown 2 -> 6 partitions (`--only growth`)."""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass

from bench.apps import benches, manifests, observing, reports
from rillet.kafka.lag import LagReader

GROWTH_PARTITIONS = (2, 3, 4, 5, 6)


GROWTH_SLEEP_MS = 20  # per record: the backlog outlasts the run


GROWTH_BACKLOG = 40_000


GROWTH_LAG_TARGET = 100


GROWTH_STEP_TIMEOUT = 240.0


@dataclass(frozen=True)
class GrowthStep:
    partitions: int
    to_kafka: float
    to_requested: float
    to_running: float


def growth(b: benches.Bench, namespace: str, reader: LagReader) -> list[GrowthStep]:
    source, target, name = f"{b.run}-grow-in", f"{b.run}-grow-out", "grow"
    first = GROWTH_PARTITIONS[0]
    b.apply(
        manifests.copying_pipeline(
            name,
            namespace,
            b.image,
            source=source,
            target=target,
            partitions=first,
            sleep_ms=GROWTH_SLEEP_MS,
            executor_cpu=b.fitting_cpu(GROWTH_PARTITIONS[-1]),
            scaling={
                "minExecutors": 1,
                "maxExecutors": GROWTH_PARTITIONS[-1],
                "executorCores": 1,
                "lagTarget": GROWTH_LAG_TARGET,
            },
        )
    )
    benches.wait_for(
        lambda: source in b.admin.list_topics(timeout=10).topics,
        timeout=60,
        what=f"topic {source}",
    )
    observing.produce(b.bootstrap, source, GROWTH_BACKLOG)
    at_cap(b, namespace, name, first)
    steps = []
    for partitions in GROWTH_PARTITIONS[1:]:
        lag = observing.group_lag(reader, namespace, name, source)
        if lag is None or lag < GROWTH_BACKLOG // 2:  # keep wanting more than the cap
            observing.produce(b.bootstrap, source, GROWTH_BACKLOG)
        steps.append(grow(b, namespace, name, source, partitions))
        step = steps[-1]
        print(
            f"  growth {partitions - 1}->{partitions} partitions: Kafka {step.to_kafka:.1f} s, "
            f"executors requested {step.to_requested:.1f} s, Running {step.to_running:.1f} s",
            flush=True,
        )
    observing.delete_app(b, namespace, name)
    return steps


def at_cap(b: benches.Bench, namespace: str, name: str, cap: int) -> None:
    def settled() -> bool:
        executors = observing.executors_status(b, namespace, name)
        return (
            executors.get("cap") == cap
            and executors.get("desired") == cap
            and observing.running(b.core, namespace, name) == cap
        )

    benches.wait_for(settled, timeout=300, what=f"App {name} at {cap} executors, all Running")


def grow(b: benches.Bench, namespace: str, name: str, source: str, partitions: int) -> GrowthStep:
    started = time.monotonic()
    patch = json.dumps({"spec": {"partitions": partitions}})
    b.kubectl("patch", "topic", source, "-n", namespace, "--type=merge", "-p", patch)
    to_kafka = to_requested = to_running = None
    while to_kafka is None or to_requested is None or to_running is None:
        now = time.monotonic() - started
        if now > GROWTH_STEP_TIMEOUT:
            raise TimeoutError(
                f"{partitions} partitions: after {now:.0f} s Kafka {to_kafka}, requested "
                f"{to_requested}, Running {to_running}: "
                f"{observing.executors_status(b, namespace, name)}"
            )
        if to_kafka is None and observing.kafka_partitions(b.admin, source) == partitions:
            to_kafka = now
        if to_requested is None:
            executors = observing.executors_status(b, namespace, name)
            if executors.get("cap") == partitions and executors.get("desired") == partitions:
                to_requested = now
        if to_running is None and observing.running(b.core, namespace, name) >= partitions:
            to_running = now
        time.sleep(0.1)
    return GrowthStep(partitions, to_kafka, to_requested, to_running)


def report_growth(steps: list[GrowthStep]) -> reports.Report:
    def median(values: Iterable[float]) -> float:
        return statistics.median(values)

    requested = median(s.to_requested for s in steps)
    line = (
        f"growth: median over {len(steps)} steps from the Topic's patch: Kafka "
        f"{median(s.to_kafka for s in steps):.1f} s, executors requested {requested:.1f} s, "
        f"Running {median(s.to_running for s in steps):.1f} s (pods start in "
        f"{median(s.to_running - s.to_requested for s in steps):.1f} s)  target requested "
        f"<= 10 s {reports.verdict(requested <= 10)}"
    )
    figures = {
        "growth_steps": [dataclasses.asdict(s) for s in steps],
        "growth_to_kafka_median_s": median(s.to_kafka for s in steps),
        "growth_to_requested_median_s": requested,
        "growth_to_running_median_s": median(s.to_running for s in steps),
    }
    return figures, [line]
