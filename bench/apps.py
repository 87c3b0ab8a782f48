"""App scaling benchmark: executors following partitions, a spike three ways, the cost of Apps.

    .venv/bin/python bench/apps.py [--only growth|spike|cost|pause]  # starts or reuses the stack

Needs the stack's worker node: the Apps run for real from its runtime image. They copy records
from one Topic to another through a deliberately slow pipeline (Thread.sleep per record, as in
tests/integration/test_apps_scaling_on_node.py), with executors of 250m CPU and 1Gi: what fits
the node's 2 CPUs (less CPU, printed, when pods of others already request some). Prints, with
baselines measured in the same run:

- growth: one App (maxExecutors 6, executorCores 1, lagTarget 100) on a Topic grown 2 -> 6
  partitions one at a time, with a backlog that wants more executors than the cap. Per step:
  seconds from `kubectl patch` of the Topic to Kafka having the partitions (the Topic handler),
  to status.executors.desired at the new cap (the scaling loop; the driver reads it within 2 s)
  and to that many executor pods Running (Spark and the kubelet). Target: median <= 10 s to
  requested.
- spike: a burst of SPIKE_RECORDS records then LOW_RATE records/s, on a Topic of CAP partitions,
  run three ways one after the other: (a) Rillet's lag scaling (minExecutors 1, maxExecutors
  CAP); (b) Spark's dynamic allocation (shuffle tracking, 1..CAP executors), which the App API
  refuses (spark.dynamicAllocation.* is Rillet's): the App's objects are built with the
  operator's own `build_app_objects`, the keys added to the driver's Spark conf (its ConfigMap,
  which reaches the driver as RILLET_SPARK_CONF_JSON), and applied with their App in a namespace
  no operator watches, so that no status tells the driver a count and Spark alone decides;
  (c) fixed at CAP executors. Each way meets the burst warm and at rest (its minimum count).
  Per way: seconds from the burst to the consumer group's lag back under DRAINED_LAG (read from
  Kafka the same way for all three), executor-seconds over SPIKE_WINDOW seconds from the burst
  (Running executor pods sampled every second), and scale events: changes of the count the
  autoscaler asks for, as the HPA counts its rescales (the App's status.executors.desired; for
  dynamic allocation Spark's target, numberTargetExecutors of the driver's metrics). Printed
  beside them: changes of the Running pod count (a scale-down ends pods one by one) and moves,
  those changes in one direction within MOVE_SECONDS counted once. Targets:
  executor-seconds of (a) <= 0.60 of (c), drain of (a) <= 1.2x (c), fewer scale events for (a)
  than (b).
- cost: the operator's CPU seconds (to settle, and per minute once settled) and peak and steady
  RSS, from /proc, with COST_APPS Apps and COST_TOPICS Topics, against the same operator with
  the COST_TOPICS Topics alone, each a fresh process. The Apps' drivers request 64 CPUs: no node
  runs them, so their pods stay Pending while the operator does all of its work (objects,
  status, lag reads, pod lists). Target: RSS <= 300 MB.
- pause (bench/scalepause.py): the longest gap between committed batches (the consumer group's
  offsets in Kafka) during a scale-up and a scale-down, medians over three events each, against
  the steady gap between batches of the same run, with the executor pods before and after each.
  Target: below 2x the steady gap (Flink's autoscaler plans for a 5-minute restart per rescale).

Everything is named after one run prefix and removed at the end, on failure too: namespaces,
Kafka topics and consumer groups.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import dataclasses
import datetime
import itertools
import json
import os
import statistics
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import scalepause
import yaml
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kubernetes import client, config

from rillet.api.v1alpha1 import apps, objects, topics
from rillet.devstack import stack as devstack
from rillet.devstack import tools
from rillet.devstack.operating import OperatorProcess
from rillet.driverapi import wiring
from rillet.kafka.lag import LagReader
from rillet.reconcile import appobjects, naming, runresolving, scaling

REPO = Path(__file__).resolve().parents[1]
GROUP, VERSION = "rillet.io", "v1alpha1"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# The operator's production default: Topics are re-checked against Kafka every 30 s.
RESYNC_SECONDS = 30.0

# Small requests: the driver and six executors share the node's two CPUs (executors get less
# than EXECUTOR_CPU_MILLIS when pods of others, say the demo, already hold some: `fitting_cpu`).
DRIVER = {"cpu": "250m", "memory": "1536Mi"}
DRIVER_CPU_MILLIS = 250
EXECUTOR_CPU_MILLIS = 250
EXECUTOR_MEMORY = "1Gi"

GROWTH_PARTITIONS = (2, 3, 4, 5, 6)
GROWTH_SLEEP_MS = 20  # per record: the backlog outlasts the run
GROWTH_BACKLOG = 40_000
GROWTH_LAG_TARGET = 100
GROWTH_STEP_TIMEOUT = 240.0

CAP = 4  # partitions of the spike's input, and at most that many executors
SPIKE_SLEEP_MS = 2
SPIKE_RECORDS = 20_000  # some 20 s of work for CAP executors on the shared node
LOW_RATE = 50  # records per second after the burst
SPIKE_WINDOW = 180.0  # seconds from the burst over which executor-seconds are counted
DRAIN_TIMEOUT = 600.0
MOVE_SECONDS = 5.0  # changes of the executor count closer than this in one direction: one move
DRAINED_LAG = 5 * LOW_RATE  # "back to ~0": five seconds of the low rate
WARMUP_RECORDS = 200
SPIKE_LAG_TARGET = 1000
SPIKE_STABILIZATION_SECONDS = 30
SPARK_UI_PORT = 4040
TARGET_EXECUTORS_GAUGE = "ExecutorAllocationManager.executors.numberTargetExecutors"
DYNAMIC_ALLOCATION = {  # Spark's defaults otherwise: executorIdleTimeout 60s, backlog 1s
    "spark.dynamicAllocation.enabled": "true",
    "spark.dynamicAllocation.shuffleTracking.enabled": "true",
    "spark.dynamicAllocation.minExecutors": "1",
    "spark.dynamicAllocation.initialExecutors": "1",
    "spark.dynamicAllocation.maxExecutors": str(CAP),
}

COST_TOPICS = 1_000
COST_APPS = 100
COST_STEADY_SECONDS = 90.0  # three resyncs, 45 scaling passes
COST_SETTLE_TIMEOUT = 900.0


# The stack and its clients ---------------------------------------------------------------------


@dataclass
class Bench:
    """The stack, the clients, and everything this run made (removed by `cleanup`)."""

    state: devstack.StackState
    image: str
    run: str
    admin: AdminClient
    custom: Any  # kubernetes' CustomObjectsApi, CoreV1Api (untyped)
    core: Any
    apiserver_url: str
    logs: Path
    free_cpu_millis: int  # CPU the node's pods leave unrequested when the run starts
    namespaces: list[str] = field(default_factory=list)
    operators: list[OperatorProcess] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return self.state.kafka_bootstrap

    def fitting_cpu(self, executors: int) -> str:
        """The CPU request of each of `executors` executors so that they and their driver fit
        the node beside what runs there already: EXECUTOR_CPU_MILLIS, or less."""
        share = (self.free_cpu_millis - DRIVER_CPU_MILLIS) // executors
        if share < 50:
            raise SystemExit(f"the node has {self.free_cpu_millis}m CPU free: too little")
        return f"{min(EXECUTOR_CPU_MILLIS, share // 10 * 10)}m"

    def kubectl(self, *args: str, stdin: str | None = None, timeout: float = 300) -> str:
        result = tools.run_kubectl(self.state.kubeconfig, args, input=stdin, timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args[:3])} ...: {result.stderr.strip()}")
        return result.stdout

    def apply(self, manifests: Iterable[dict[str, Any]]) -> None:
        text = yaml.safe_dump_all(list(manifests))
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=self.logs) as handle:
            handle.write(text)
            handle.flush()
            self.kubectl("apply", "--server-side", "--field-manager=bench", "-f", handle.name)

    def namespace(self, suffix: str) -> str:
        name = f"{self.run}-{suffix}"
        self.kubectl("create", "namespace", name)
        self.namespaces.append(name)
        return name

    def operator(self, namespace: str) -> OperatorProcess:
        """A fresh operator watching `namespace` alone, started."""
        process = OperatorProcess(
            kubeconfig=self.state.kubeconfig,
            bootstrap=self.bootstrap,
            namespace_pattern=namespace,
            log=self.logs / f"operator-{namespace}.log",
            resync_seconds=RESYNC_SECONDS,
        )
        self.operators.append(process)
        process.start()
        wait_for(
            lambda: "Rillet operator started" in process.log_text(),
            timeout=60,
            interval=0.1,
            what=f"the operator of {namespace} to start (log {process.log})",
        )
        return process

    def drop_namespace(self, name: str) -> None:
        """Delete a namespace of the run and wait until it is gone (its pods with it)."""
        self.kubectl("delete", "namespace", name, "--ignore-not-found", "--timeout=300s")
        if name in self.namespaces:
            self.namespaces.remove(name)

    def cleanup(self) -> None:
        """Operators, namespaces, Kafka topics and consumer groups of the run; never raises."""
        for process in self.operators:
            process.stop()
        for name in list(self.namespaces):
            try:
                self.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")
            except Exception as error:
                print(f"cleanup: deleting namespace {name} failed: {error}", flush=True)
        for name in list(self.namespaces):
            try:
                self.drop_namespace(name)
            except Exception as error:
                print(f"cleanup: namespace {name} not gone: {error}", flush=True)
        try:
            delete_kafka_topics(self.admin, prefix=f"{self.run}-")
            # Groups are rillet.<namespace>.<app>, and every namespace of the run starts with it.
            delete_groups(self.admin, prefix=f"rillet.{self.run}-")
        except Exception as error:
            print(f"cleanup: Kafka: {error}", flush=True)


def cpu_millis(quantity: str) -> int:
    """A Kubernetes CPU quantity ("250m", "2", "0.5") in millicores."""
    if quantity.endswith("m"):
        return int(quantity[:-1])
    return round(float(quantity) * 1000)


def free_cpu(core: Any, node_name: str) -> int:
    """Millicores of the node's allocatable CPU that no running or pending pod requests."""
    allocatable = cpu_millis(core.read_node(node_name).status.allocatable["cpu"])
    requested = 0
    for pod in core.list_pod_for_all_namespaces().items:
        if pod.status.phase in ("Succeeded", "Failed"):
            continue
        if pod.spec.node_name not in (None, node_name):
            continue
        for container in pod.spec.containers:
            requests = (container.resources.requests if container.resources else None) or {}
            requested += cpu_millis(requests.get("cpu", "0"))
    return allocatable - requested


def wait_for(probe: Callable[[], Any], *, timeout: float, what: str, interval: float = 1.0) -> Any:
    """The first truthy value of `probe`, polled until `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        time.sleep(interval)


def delete_kafka_topics(admin: AdminClient, *, prefix: str) -> None:
    names = [name for name in admin.list_topics(timeout=10).topics if name.startswith(prefix)]
    if not names:  # delete_topics refuses an empty list
        return
    for future in admin.delete_topics(names, operation_timeout=120).values():
        try:
            future.result()
        except KafkaException as error:  # already being deleted
            if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise


def delete_groups(admin: AdminClient, *, prefix: str) -> None:
    listed = admin.list_consumer_groups(request_timeout=30).result()
    names = [g.group_id for g in listed.valid if g.group_id.startswith(prefix)]
    if names:
        for future in admin.delete_consumer_groups(names, request_timeout=30).values():
            future.result()


# Manifests --------------------------------------------------------------------------------------


def topic_manifest(name: str, namespace: str, partitions: int) -> dict[str, Any]:
    return {
        "apiVersion": objects.API_VERSION,
        "kind": "Topic",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"partitions": partitions},
    }


def slow_copy(sleep_ms: int) -> str:
    """Records copied as they are, `sleep_ms` per record (Java's Thread.sleep through reflect;
    the pause is part of the value so that Spark cannot prune it away)."""
    return (
        "SELECT concat(value, coalesce(nullif(reflect('java.lang.Thread', 'sleep', "
        f"CAST({sleep_ms} AS BIGINT)), 'null'), '')) AS value FROM lines"
    )


def copying_app(
    name: str,
    namespace: str,
    image: str,
    *,
    source: str,
    target: str,
    sleep_ms: int,
    scaling_spec: dict[str, Any],
    executor_cpu: str = f"{EXECUTOR_CPU_MILLIS}m",
    driver: dict[str, str] = DRIVER,
) -> dict[str, Any]:
    return {
        "apiVersion": objects.API_VERSION,
        "kind": "App",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "image": image,
            "inputs": [
                {
                    "name": "lines",
                    "topicRef": {"name": source},
                    "format": "string",
                    "startingOffsets": "earliest",
                }
            ],
            "pipeline": {"sql": slow_copy(sleep_ms)},
            "outputs": [{"topicRef": {"name": target}}],
            "driver": dict(driver),
            "executor": {"cpu": executor_cpu, "memory": EXECUTOR_MEMORY},
            "scaling": scaling_spec,
            "trigger": {"processingTime": "2s"},
        },
    }


# Observing Apps --------------------------------------------------------------------------------


def app_body(b: Bench, namespace: str, name: str) -> dict[str, Any]:
    found = b.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "apps", name)
    return cast(dict[str, Any], found)


def executors_status(b: Bench, namespace: str, name: str) -> dict[str, Any]:
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


def delete_app(b: Bench, namespace: str, name: str) -> None:
    """Delete the App and wait until its pods (driver and executors) are gone."""
    b.kubectl("delete", "app", name, "-n", namespace, "--ignore-not-found")
    wait_for(
        lambda: (
            not pods_of(b.core, namespace, name, "driver")
            and not pods_of(b.core, namespace, name, "executor")
        ),
        timeout=300,
        what=f"the pods of App {namespace}/{name} gone",
    )


# growth -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GrowthStep:
    partitions: int
    to_kafka: float
    to_requested: float
    to_running: float


def growth(b: Bench, namespace: str, reader: LagReader) -> list[GrowthStep]:
    source, target, name = f"{b.run}-grow-in", f"{b.run}-grow-out", "grow"
    first = GROWTH_PARTITIONS[0]
    b.apply(
        [
            topic_manifest(source, namespace, first),
            topic_manifest(target, namespace, first),
            copying_app(
                name,
                namespace,
                b.image,
                source=source,
                target=target,
                sleep_ms=GROWTH_SLEEP_MS,
                executor_cpu=b.fitting_cpu(GROWTH_PARTITIONS[-1]),
                scaling_spec={
                    "minExecutors": 1,
                    "maxExecutors": GROWTH_PARTITIONS[-1],
                    "executorCores": 1,
                    "lagTarget": GROWTH_LAG_TARGET,
                },
            ),
        ]
    )
    wait_for(
        lambda: source in b.admin.list_topics(timeout=10).topics,
        timeout=60,
        what=f"topic {source}",
    )
    produce(b.bootstrap, source, GROWTH_BACKLOG)
    at_cap(b, namespace, name, first)
    steps = []
    for partitions in GROWTH_PARTITIONS[1:]:
        lag = group_lag(reader, namespace, name, source)
        if lag is None or lag < GROWTH_BACKLOG // 2:  # keep wanting more than the cap
            produce(b.bootstrap, source, GROWTH_BACKLOG)
        steps.append(grow(b, namespace, name, source, partitions))
        step = steps[-1]
        print(
            f"  growth {partitions - 1}->{partitions} partitions: Kafka {step.to_kafka:.1f} s, "
            f"executors requested {step.to_requested:.1f} s, Running {step.to_running:.1f} s",
            flush=True,
        )
    delete_app(b, namespace, name)
    return steps


def at_cap(b: Bench, namespace: str, name: str, cap: int) -> None:
    def settled() -> bool:
        executors = executors_status(b, namespace, name)
        return (
            executors.get("cap") == cap
            and executors.get("desired") == cap
            and running(b.core, namespace, name) == cap
        )

    wait_for(settled, timeout=300, what=f"App {name} at {cap} executors, all Running")


def grow(b: Bench, namespace: str, name: str, source: str, partitions: int) -> GrowthStep:
    started = time.monotonic()
    patch = json.dumps({"spec": {"partitions": partitions}})
    b.kubectl("patch", "topic", source, "-n", namespace, "--type=merge", "-p", patch)
    to_kafka = to_requested = to_running = None
    while to_kafka is None or to_requested is None or to_running is None:
        now = time.monotonic() - started
        if now > GROWTH_STEP_TIMEOUT:
            raise TimeoutError(
                f"{partitions} partitions: after {now:.0f} s Kafka {to_kafka}, requested "
                f"{to_requested}, Running {to_running}: {executors_status(b, namespace, name)}"
            )
        if to_kafka is None and kafka_partitions(b.admin, source) == partitions:
            to_kafka = now
        if to_requested is None:
            executors = executors_status(b, namespace, name)
            if executors.get("cap") == partitions and executors.get("desired") == partitions:
                to_requested = now
        if to_running is None and running(b.core, namespace, name) >= partitions:
            to_running = now
        time.sleep(0.1)
    return GrowthStep(partitions, to_kafka, to_requested, to_running)


# spike ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    at: float  # seconds since the burst began
    running: int
    lag: int | None
    requested: int | None = None  # the executor count the autoscaler asks for (None: unread)


@dataclass(frozen=True)
class SpikeResult:
    way: str
    drain: float | None
    executor_seconds: float
    scale_events: int
    scale_moves: int
    series: tuple[int, ...]
    requests: int  # changes of the count asked for: the autoscaler's own scale events


@dataclass(frozen=True)
class Way:
    label: str
    namespace: str
    app: str
    source: str
    unwatched: bool = False  # no operator: Spark's dynamic allocation alone sizes it


def spike_scaling(minimum: int) -> dict[str, Any]:
    return {
        "minExecutors": minimum,
        "maxExecutors": CAP,
        "executorCores": 1,
        "lagTarget": SPIKE_LAG_TARGET,
        "stabilizationWindowSeconds": SPIKE_STABILIZATION_SECONDS,
    }


def operated_way(b: Bench, namespace: str, label: str, app: str, minimum: int) -> Way:
    """An App the operator runs, with its Topics."""
    source, target = f"{b.run}-{app}-in", f"{b.run}-{app}-out"
    b.apply(
        [
            topic_manifest(source, namespace, CAP),
            topic_manifest(target, namespace, CAP),
            copying_app(
                app,
                namespace,
                b.image,
                source=source,
                target=target,
                sleep_ms=SPIKE_SLEEP_MS,
                executor_cpu=b.fitting_cpu(CAP),
                scaling_spec=spike_scaling(minimum),
            ),
        ]
    )
    return Way(label, namespace, app, source)


def dynamic_allocation_way(b: Bench, namespace: str, app: str) -> Way:
    """The same App's objects, built as the operator builds them, with Spark's dynamic
    allocation in the driver's Spark conf; its App has no status (no operator watches the
    namespace), so the driver asks Spark for no executor count of its own."""
    source, target = f"{b.run}-{app}-in", f"{b.run}-{app}-out"
    futures = b.admin.create_topics([NewTopic(t, CAP, 1) for t in (source, target)])
    for future in futures.values():
        future.result(timeout=60)
    manifest = copying_app(
        app,
        namespace,
        b.image,
        source=source,
        target=target,
        sleep_ms=SPIKE_SLEEP_MS,
        executor_cpu=b.fitting_cpu(CAP),
        scaling_spec=spike_scaling(1),
    )
    created = b.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "apps", manifest)
    meta = created["metadata"]
    model = apps.App.model_validate(
        {
            "apiVersion": objects.API_VERSION,
            "kind": "App",
            "metadata": {k: meta.get(k) for k in ("name", "namespace", "uid", "generation")},
            "spec": created["spec"],
        }
    )
    topic_models = {
        t: topics.Topic.model_validate(
            {"metadata": {"name": t, "namespace": namespace}, "spec": {"partitions": CAP}}
        )
        for t in (source, target)
    }
    run_spec = runresolving.build_run_spec(
        model,
        topics_by_name=topic_models,
        tables_by_name={},
        bootstrap_servers=b.bootstrap,
        checkpoint_location=appobjects.checkpoint_location(model),
        namespace=namespace,
    )
    env = appobjects.AppEnvironment(kafka_bootstrap=b.bootstrap, apiserver_url=b.apiserver_url)
    built = appobjects.build_app_objects(model, run_spec, env)
    config_map = copy.deepcopy(built.config_map)
    spark_conf = {**built.spark_conf, **DYNAMIC_ALLOCATION}
    config_map["data"][wiring.SPARK_CONF_KEY] = wiring.render_spark_conf(spark_conf)
    b.apply(
        [
            built.service_account,
            built.role,
            built.role_binding,
            config_map,
            built.service,
            built.stateful_set,
        ]
    )
    return Way("Spark dynamic allocation", namespace, app, source, unwatched=True)


def run_spike(b: Bench, way: Way, reader: LagReader, initial: int) -> SpikeResult:
    """Warm the App up, then the burst and the low rate; sample executors and lag each second."""
    ns, app = way.namespace, way.app
    wait_for(
        lambda: running(b.core, ns, app, "driver") == 1 and running(b.core, ns, app) == initial,
        timeout=300,
        what=f"{way.label}: the driver and {initial} executors Running",
    )
    produce(b.bootstrap, way.source, WARMUP_RECORDS, tag="warm-up", partitions=CAP)
    wait_for(
        lambda: group_lag(reader, ns, app, way.source) == 0,
        timeout=300,
        what=f"{way.label}: the warm-up records processed and committed",
    )
    # The burst meets each way at rest: the warm-up's first batch (JIT, code generation) may
    # have made dynamic allocation add executors, idle since; Spark removes them after its
    # executorIdleTimeout (60 s).
    wait_for(
        lambda: running(b.core, ns, app) == initial,
        timeout=300,
        what=f"{way.label}: back to {initial} executors after the warm-up",
    )
    samples: list[Sample] = []
    stop = threading.Event()
    started, started_wall = time.monotonic(), time.time()
    sampler = threading.Thread(
        target=sample_spike, args=(b, way, started, samples, stop), daemon=True
    )
    sampler.start()
    try:
        produce(b.bootstrap, way.source, SPIKE_RECORDS, tag="burst", partitions=CAP)
        burst_done = time.monotonic() - started
        low_rate(b, way, started, samples, burst_done)
    finally:
        stop.set()
        sampler.join(timeout=30)
    drained = next(
        (
            s.at
            for s in samples
            if s.at >= burst_done and s.lag is not None and s.lag <= DRAINED_LAG
        ),
        None,
    )
    if way.unwatched:
        check_unwatched(b, way)
    dump = b.logs / f"spike-{app}.json"  # the samples, to look into a figure
    dump.write_text(json.dumps([dataclasses.asdict(s) for s in samples]))
    print_task_timeline(b, way, started_wall, drained)
    inside = [s for s in samples if s.at <= SPIKE_WINDOW]
    series = tuple(s.running for s in inside)
    return SpikeResult(
        way=way.label,
        drain=drained,
        executor_seconds=executor_seconds(inside, SPIKE_WINDOW),
        scale_events=scaling.count_scale_events(series),
        scale_moves=count_moves(inside),
        series=series,
        requests=scaling.count_scale_events(s.requested for s in inside if s.requested is not None),
    )


def _spark_time(stamp: str) -> float:
    """Epoch seconds of a time Spark's REST API gives ("2026-11-25T03:00:00.123GMT")."""
    parsed = datetime.datetime.strptime(stamp.removesuffix("GMT"), "%Y-%m-%dT%H:%M:%S.%f")
    return parsed.replace(tzinfo=datetime.UTC).timestamp()


def print_task_timeline(b: Bench, way: Way, burst_wall: float, drained: float | None) -> None:
    """Where the drain's seconds went, from the driver's REST API: when each executor was added
    and the longest tasks between the burst and the drain (executor, launch, duration), all of
    them dumped under the logs, the longest printed."""
    drivers = [p for p in pods_of(b.core, way.namespace, way.app, "driver") if p.status.pod_ip]
    if not drivers:
        return
    base = f"http://{drivers[0].status.pod_ip}:{SPARK_UI_PORT}/api/v1/applications"
    try:
        with urllib.request.urlopen(base, timeout=10) as response:
            app_id = json.load(response)[0]["id"]
        with urllib.request.urlopen(f"{base}/{app_id}/allexecutors", timeout=10) as response:
            executors = json.load(response)
        url = f"{base}/{app_id}/stages?details=true&status=complete"
        with urllib.request.urlopen(url, timeout=30) as response:
            stages = json.load(response)
    except OSError as error:
        print(f"  {way.label}: no task timeline ({error})", flush=True)
        return
    end = burst_wall + (drained if drained is not None else SPIKE_WINDOW)
    tasks = [
        {
            "executor": task["executorId"],
            "launched": round(_spark_time(task["launchTime"]) - burst_wall, 1),
            "seconds": round(task.get("duration", 0) / 1000, 1),
            "stage": stage["stageId"],
        }
        for stage in stages
        for task in (stage.get("tasks") or {}).values()
        if burst_wall - 5 <= _spark_time(task["launchTime"]) <= end
    ]
    added = {
        e["id"]: round(_spark_time(e["addTime"]) - burst_wall, 1)
        for e in executors
        if e["id"] != "driver" and _spark_time(e["addTime"]) >= burst_wall - 5
    }
    (b.logs / f"tasks-{way.app}.json").write_text(
        json.dumps({"executorsAdded": added, "tasks": tasks}, indent=1)
    )
    longest = sorted(tasks, key=lambda task: -float(task["seconds"]))[: CAP * 2]
    print(
        f"  {way.label}: executors added at {sorted(added.values())} s; longest tasks "
        + ", ".join(
            f"exec {t['executor']} at {t['launched']} s for {t['seconds']} s" for t in longest
        ),
        flush=True,
    )


def check_unwatched(b: Bench, way: Way) -> None:
    """No operator handled the dynamic-allocation App (one watching every namespace would have
    written its status, which the driver obeys, and its ConfigMap): the figures would lie."""
    status = app_body(b, way.namespace, way.app).get("status") or {}
    # The CRD defaults status.observedGeneration to 0 (kstatus reads an unseen App as
    # InProgress): anything more was written by an operator.
    written = {
        key: value for key, value in status.items() if (key, value) != ("observedGeneration", 0)
    }
    name = naming.app_run_config_name(way.app)
    data = b.core.read_namespaced_config_map(name, way.namespace).data
    conf = json.loads(data[wiring.SPARK_CONF_KEY])
    if written or conf.get("spark.dynamicAllocation.enabled") != "true":
        raise RuntimeError(
            f"an operator handles namespace {way.namespace} (App status {written}): stop it, "
            "the dynamic-allocation baseline needs a namespace nobody watches"
        )


def low_rate(b: Bench, way: Way, started: float, samples: list[Sample], burst_done: float) -> None:
    """LOW_RATE records/s until the window ended and the burst drained (or DRAIN_TIMEOUT)."""
    producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    sent = 0
    while True:
        now = time.monotonic() - started
        drained = any(
            s.at >= burst_done and s.lag is not None and s.lag <= DRAINED_LAG for s in list(samples)
        )
        if (now >= SPIKE_WINDOW and drained) or now >= DRAIN_TIMEOUT:
            break
        due = int((now - burst_done) * LOW_RATE) if now > burst_done else 0
        while sent < due:
            producer.produce(way.source, value=f"low {sent}".encode(), partition=sent % CAP)
            sent += 1
        producer.poll(0)
        time.sleep(0.02)
    producer.flush(30)


def sample_spike(
    b: Bench, way: Way, started: float, samples: list[Sample], stop: threading.Event
) -> None:
    """Every second: Running executor pods, the group's lag and the count asked for (own
    clients: a thread)."""
    core = client.CoreV1Api(client.ApiClient())
    custom = client.CustomObjectsApi(client.ApiClient())
    reader = LagReader({"bootstrap.servers": b.bootstrap}, timeout=5)
    while not stop.is_set():
        tick = time.monotonic()
        try:
            count = running(core, way.namespace, way.app)
            lag = group_lag(reader, way.namespace, way.app, way.source)
            requested = requested_executors(core, custom, way)
            samples.append(Sample(at=tick - started, running=count, lag=lag, requested=requested))
        except Exception as error:  # a missed sample stretches the previous one
            print(f"  sample failed: {error}", flush=True)
        stop.wait(max(0.0, 1.0 - (time.monotonic() - tick)))


def requested_executors(core: Any, custom: Any, way: Way) -> int | None:
    """The executor count the way's autoscaler asks for: the App's status.executors.desired
    (Rillet, and fixed), or Spark's target (`numberTargetExecutors` of the driver's
    ExecutorAllocationManager metrics, on its UI port) for dynamic allocation."""
    if not way.unwatched:
        found = custom.get_namespaced_custom_object(GROUP, VERSION, way.namespace, "apps", way.app)
        desired = ((found.get("status") or {}).get("executors") or {}).get("desired")
        return desired if isinstance(desired, int) else None
    drivers = [p for p in pods_of(core, way.namespace, way.app, "driver") if p.status.pod_ip]
    if not drivers:
        return None
    url = f"http://{drivers[0].status.pod_ip}:{SPARK_UI_PORT}/metrics/json"
    with urllib.request.urlopen(url, timeout=5) as response:
        gauges = json.load(response).get("gauges", {})
    target = [g["value"] for name, g in gauges.items() if name.endswith(TARGET_EXECUTORS_GAUGE)]
    return int(target[0]) if target else None


def count_moves(samples: list[Sample]) -> int:
    """Scale events grouped: changes of the Running count in the same direction, each within
    MOVE_SECONDS of the one before, count once (a scale from 4 to 1 ends pods one by one)."""
    moves, last_direction, last_at = 0, 0, float("-inf")
    for before, after in itertools.pairwise(samples):
        if after.running == before.running:
            continue
        direction = 1 if after.running > before.running else -1
        if direction != last_direction or after.at - last_at > MOVE_SECONDS:
            moves += 1
        last_direction, last_at = direction, after.at
    return moves


def executor_seconds(samples: list[Sample], window: float) -> float:
    """The Running executor count integrated over [first sample, window] (each sample holds
    until the next)."""
    ends = [*samples[1:], Sample(at=window, running=0, lag=None)]
    return sum(s.running * max(0.0, nxt.at - s.at) for s, nxt in zip(samples, ends, strict=True))


def spike(b: Bench, namespace: str, reader: LagReader) -> list[SpikeResult]:
    results = []
    ways: list[tuple[Callable[[], Way], int]] = [
        (lambda: operated_way(b, namespace, "Rillet lag scaling", "sp-rillet", 1), 1),
        (lambda: dynamic_allocation_way(b, b.namespace("dynalloc"), "sp-dynalloc"), 1),
        (lambda: operated_way(b, namespace, f"fixed at {CAP}", "sp-fixed", CAP), CAP),
    ]
    for setup, initial in ways:
        way = setup()
        print(f"  spike, {way.label} ...", flush=True)
        result = run_spike(b, way, reader, initial)
        print(
            f"  spike, {way.label}: drain {fmt(result.drain)} s, executor-seconds "
            f"{result.executor_seconds:.0f}, scale events {result.scale_events} (moves "
            f"{result.scale_moves}), executors "
            f"{describe_series(result.series)}",
            flush=True,
        )
        results.append(result)
        if way.namespace == namespace:
            delete_app(b, namespace, way.app)
        else:
            b.drop_namespace(way.namespace)
    return results


def describe_series(series: Iterable[int]) -> str:
    """The counts a series went through, with how long each lasted: 1(12s) 4(60s) 1(...)."""
    runs = [(count, len(list(group))) for count, group in itertools.groupby(series)]
    return " ".join(f"{count}({length}s)" for count, length in runs)


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def ratio(value: float | None, baseline: float | None) -> float | None:
    return value / baseline if value is not None and baseline else None


# cost -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    settle_seconds: float
    settle_cpu: float
    steady_cpu_per_minute: float
    peak_rss_mb: float
    steady_rss_mb: float


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def status_mb(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key}")


def is_ready(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def cost(b: Bench, *, with_apps: bool) -> Cost:
    namespace = b.namespace("cost-apps" if with_apps else "cost-topics")
    prefix = f"{namespace}-t"
    manifests = [topic_manifest(f"{prefix}{i:04d}", namespace, 1) for i in range(COST_TOPICS)]
    if with_apps:
        manifests += [
            copying_app(
                f"c{i:03d}",
                namespace,
                b.image,
                source=f"{prefix}{2 * i:04d}",
                target=f"{prefix}{2 * i + 1:04d}",
                sleep_ms=0,
                scaling_spec={},
                driver={"cpu": "64", "memory": "1Gi"},  # no node has it: Pending for ever
            )
            for i in range(COST_APPS)
        ]
    operator = b.operator(namespace)
    pid = operator.pid
    cpu_before, started = cpu_seconds(pid), time.monotonic()
    b.apply(manifests)
    wait_for(
        lambda: settled(b, namespace, apps=COST_APPS if with_apps else 0),
        timeout=COST_SETTLE_TIMEOUT,
        interval=2.0,
        what=f"{namespace}: every Topic Ready, every App observed with its driver Pending",
    )
    settle_seconds, settle_cpu = time.monotonic() - started, cpu_seconds(pid) - cpu_before
    steady_from, cpu_steady = time.monotonic(), cpu_seconds(pid)
    rss = []
    while time.monotonic() - steady_from < COST_STEADY_SECONDS:
        rss.append(status_mb(pid, "VmRSS"))
        time.sleep(1.0)
    steady_cpu = (cpu_seconds(pid) - cpu_steady) / (time.monotonic() - steady_from) * 60
    result = Cost(
        settle_seconds=settle_seconds,
        settle_cpu=settle_cpu,
        steady_cpu_per_minute=steady_cpu,
        peak_rss_mb=status_mb(pid, "VmHWM"),
        steady_rss_mb=statistics.median(rss),
    )
    operator.stop()
    b.drop_namespace(namespace)
    delete_kafka_topics(b.admin, prefix=prefix)
    return result


def settled(b: Bench, namespace: str, *, apps: int) -> bool:
    listed = b.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "topics")
    if sum(is_ready(item) for item in listed["items"]) < COST_TOPICS:
        return False
    if not apps:
        return True
    bodies = b.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "apps")["items"]
    observed = [
        body
        for body in bodies
        if (status := body.get("status") or {}).get("observedGeneration")
        == body["metadata"]["generation"]
        and (status.get("executors") or {}).get("desired") is not None
        and status.get("lag") is not None
    ]
    drivers = b.core.list_namespaced_pod(namespace, label_selector="rillet.io/role=driver").items
    return len(observed) == apps and len(drivers) == apps


# Main -------------------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


Report = tuple[dict[str, Any], list[str]]  # figures (printed as JSON), then the summary lines


def report_growth(steps: list[GrowthStep]) -> Report:
    def median(values: Iterable[float]) -> float:
        return statistics.median(values)

    requested = median(s.to_requested for s in steps)
    line = (
        f"growth: median over {len(steps)} steps from the Topic's patch: Kafka "
        f"{median(s.to_kafka for s in steps):.1f} s, executors requested {requested:.1f} s, "
        f"Running {median(s.to_running for s in steps):.1f} s (pods start in "
        f"{median(s.to_running - s.to_requested for s in steps):.1f} s)  target requested "
        f"<= 10 s {verdict(requested <= 10)}"
    )
    figures = {
        "growth_steps": [dataclasses.asdict(s) for s in steps],
        "growth_to_kafka_median_s": median(s.to_kafka for s in steps),
        "growth_to_requested_median_s": requested,
        "growth_to_running_median_s": median(s.to_running for s in steps),
    }
    return figures, [line]


def report_spike(results: list[SpikeResult]) -> Report:
    rillet, dynamic, fixed = results
    lines = [
        f"spike: {SPIKE_RECORDS:,} records at once, then {LOW_RATE}/s; {CAP} partitions, "
        f"{SPIKE_SLEEP_MS} ms per record; executor-seconds over {SPIKE_WINDOW:.0f} s from the "
        f"burst; drained = lag <= {DRAINED_LAG}",
        f"  {'':28}{'drain s':>9}{'exec-s':>9}{'scale events':>14}{'pod changes':>13}{'moves':>7}",
    ]
    for r in results:
        lines.append(
            f"  {r.way:<28}{fmt(r.drain):>9}{r.executor_seconds:>9.0f}{r.requests:>14}"
            f"{r.scale_events:>13}{r.scale_moves:>7}"
        )
    ratios: dict[str, float | None] = {}
    for name, r in (("rillet", rillet), ("dynamic_allocation", dynamic)):
        ratios[f"{name}_executor_seconds_vs_fixed"] = ratio(
            r.executor_seconds, fixed.executor_seconds
        )
        ratios[f"{name}_drain_vs_fixed"] = ratio(r.drain, fixed.drain)
    cheaper, drain = ratios["rillet_executor_seconds_vs_fixed"], ratios["rillet_drain_vs_fixed"]
    lines += [
        f"  Rillet vs fixed: executor-seconds {fmt(cheaper, 2)}x (target <= 0.60 "
        f"{verdict(cheaper is not None and cheaper <= 0.60)}), drain {fmt(drain, 2)}x (target "
        f"<= 1.2x {verdict(drain is not None and drain <= 1.2)})",
        f"  dynamic allocation vs fixed: executor-seconds "
        f"{fmt(ratios['dynamic_allocation_executor_seconds_vs_fixed'], 2)}x, drain "
        f"{fmt(ratios['dynamic_allocation_drain_vs_fixed'], 2)}x",
        f"  scale events (changes of the count asked for): Rillet {rillet.requests} vs dynamic "
        f"allocation {dynamic.requests} (target fewer "
        f"{verdict(rillet.requests < dynamic.requests)}); changes of the Running pods "
        f"{rillet.scale_events} vs {dynamic.scale_events}, moves (those in one direction "
        f"within {MOVE_SECONDS:.0f} s counted once) {rillet.scale_moves} vs "
        f"{dynamic.scale_moves}",
    ]
    figures = {
        "spike": [{**dataclasses.asdict(r), "series": describe_series(r.series)} for r in results],
        **{f"spike_{key}": value for key, value in ratios.items()},
    }
    return figures, lines


def report_cost(baseline: Cost, full: Cost) -> Report:
    lines = [
        f"cost: {COST_APPS} Apps (drivers Pending) and {COST_TOPICS} Topics vs {COST_TOPICS} "
        f"Topics alone, a fresh operator each, resync {RESYNC_SECONDS:.0f} s",
        f"  {'':26}{'Topics alone':>14}{'+ Apps':>10}{'ratio':>8}",
    ]
    rows = (
        ("settle (s)", baseline.settle_seconds, full.settle_seconds),
        ("CPU-s to settle", baseline.settle_cpu, full.settle_cpu),
        ("CPU-s per minute, settled", baseline.steady_cpu_per_minute, full.steady_cpu_per_minute),
        ("peak RSS (MB)", baseline.peak_rss_mb, full.peak_rss_mb),
        ("steady RSS (MB)", baseline.steady_rss_mb, full.steady_rss_mb),
    )
    for label, before, after in rows:
        ratio = after / before if before else float("nan")
        lines.append(f"  {label:<26}{before:>14.1f}{after:>10.1f}{ratio:>7.2f}x")
    lines.append(
        f"  target RSS <= 300 MB with the Apps: peak {verdict(full.peak_rss_mb <= 300)}, "
        f"steady {verdict(full.steady_rss_mb <= 300)}"
    )
    figures = {
        "cost_topics_alone": dataclasses.asdict(baseline),
        "cost_with_apps": dataclasses.asdict(full),
    }
    return figures, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", choices=["growth", "spike", "cost", "pause"], help="one part only"
    )
    only = parser.parse_args().only

    # A running stack is reused whatever its shape (`up` would restart one of another shape:
    # the stack may be shared), with the images of the sources as they are now.
    running_stack = devstack.running()
    state = devstack.with_current_images(running_stack) if running_stack else devstack.up()
    if state.node is None or "runtime" not in state.node.images:
        raise SystemExit("the stack runs without a node: the Apps need it (`rillet dev up`)")
    config.load_kube_config(config_file=str(state.kubeconfig))  # type: ignore[no-untyped-call]
    tools.run_kubectl(
        state.kubeconfig, ["apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds")]
    )
    run = f"bench-apps-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api()
    b = Bench(
        state=state,
        image=state.node.images["runtime"],
        run=run,
        # Quiet: librdkafka notices (a partition count changed) are what the run is about.
        admin=AdminClient({"bootstrap.servers": state.kafka_bootstrap, "log_level": 3}),
        custom=client.CustomObjectsApi(),
        core=core,
        # As the operator's AppKube has it: the apiserver of its kubeconfig.
        apiserver_url=str(client.Configuration.get_default_copy().host),
        logs=Path(tempfile.mkdtemp(prefix=f"{run}-")),
        free_cpu_millis=free_cpu(core, state.node.name),
    )
    print(
        f"run {run}; operator logs in {b.logs}; the node has {b.free_cpu_millis}m CPU free: "
        f"executors of {b.fitting_cpu(GROWTH_PARTITIONS[-1])} (growth), "
        f"{b.fitting_cpu(CAP)} (spike)",
        flush=True,
    )
    reader = LagReader({"bootstrap.servers": state.kafka_bootstrap}, timeout=5)
    reports: list[Callable[[], Report]] = []
    try:
        if only in (None, "growth", "spike", "pause"):
            namespace = b.namespace("apps")
            operator = b.operator(namespace)
            if only in (None, "growth"):
                steps = growth(b, namespace, reader)
                reports.append(lambda: report_growth(steps))
            if only in (None, "spike"):
                outcomes = spike(b, namespace, reader)
                reports.append(lambda: report_spike(outcomes))
            if only in (None, "pause"):
                paused = scalepause.pause(b, namespace)
                reports.append(lambda: scalepause.report(paused))
            operator.stop()
            b.drop_namespace(namespace)
        if only in (None, "cost"):
            baseline = cost(b, with_apps=False)
            print(f"  cost, Topics alone: {baseline}", flush=True)
            full = cost(b, with_apps=True)
            print(f"  cost, with Apps: {full}", flush=True)
            reports.append(lambda: report_cost(baseline, full))
    finally:
        b.cleanup()
    figures: dict[str, Any] = {}
    lines: list[str] = []
    for report in reports:
        more, said = report()
        figures |= more
        lines += said
    print(json.dumps(figures, indent=2))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
