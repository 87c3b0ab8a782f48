"""Losing the driver's node: seconds from the node's crash to the App's first batch committed
again, against a plain driver restart on a live node in the same run.

    flock /tmp/rillet-node.lock .venv/bin/python -m bench.apps --only nodeloss

Needs a stack of two nodes with the object store (`rillet dev up --nodes 2 --object-store`),
which it neither starts nor changes: it refuses to run without them. Not in the default run.

One App copies pause.PAUSE_RATE records/s (pause.feed, over pause.PAUSE_PARTITIONS partitions)
with one executor, its checkpoint in the stack's bucket (s3a://, spec.checkpoint.secretRef to a
copy of Secret rillet-objectstore, spec.checkpoint.endpoint of `rillet dev env`): a checkpoint
that no node holds, so a driver can start again on any node. Run NODELOSS_ROUNDS times each:

- restart (the baseline): `kubectl delete pod` of the driver, its node up. Seconds from the
  delete to the new driver pod Running, and to the first batch it commits.
- node loss: the driver moved to node 2 (node 1 cordoned, the driver pod deleted, Running on
  node 2, node 1 uncordoned, batches committed again), then node 2 stopped as a crash would
  (rillet_devstack.nodegrowing.stop: everything in its cgroup SIGKILLed). The App's Stalled
  condition with reason DriverNodeLost is awaited, and the node is then tainted
  `node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`, as that condition's message tells
  the user (decision 019). Seconds from the stop to DriverNodeLost in the App's status (the
  node monitor's grace period and the operator's next look), to the new driver pod Running on
  node 1, and to the first batch it commits. Node 2 is then untainted, started again and Ready.

Ground truth, from outside the driver: batches are the App's consumer group's committed offsets
growing in Kafka (pause.CommitWatcher, read every pause.SAMPLE_SECONDS). A round's first batch
is the first growth seen after the new driver pod is Running: the old driver cannot commit any
more by then (a StatefulSet starts its pod again only once the old one is gone), and the new one
needs many seconds more to run a batch. Pods and conditions are read from the apiserver.

Printed: the medians of each, the ratio node-loss / restart (stop or delete to first batch), and
the node monitor's part (stop -> DriverNodeLost) on its own, with every round's figures.

Measured (one run, two nodes of the shared 2-CPU machine, executor 250m, with Kubernetes'
default 50 s grace period; the stack now sets 20 s, rillet_devstack.node): restart 34.0, 41.6,
45.3 s to the first batch (driver Running in 3.9-4.8 s: Spark's start and its executor's are
the rest); node loss 94.9, 92.7, 90.3 s (DriverNodeLost at 42-52 s, driver Running on node 1 at
62-70 s). Medians 92.7 s against 41.6 s: 2.23x, of which the node monitor's 49.3 s is most of
the difference; after DriverNodeLost the taint brings the driver back in about a restart's time
(45.6 s to the first batch).
"""

from __future__ import annotations

import dataclasses
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any

from minio.deleteobjects import DeleteObject

from bench.apps import benches, manifests, observing, pause, reports, settings
from rillet.reconcile import appstatus, naming
from rillet_devstack import extranodes, nodegrowing, objectstoring
from rillet_devstack import stack as devstack

NODE_2 = extranodes.extra_node(2).spec.name
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
SECRET = "objectstore"  # the copy of the stack's Secret in the run's namespace
NODELOSS_SLEEP_MS = 2  # per record: 200 records a batch, 0.4 s of work for the executor
WARM_COMMITS = 3  # batches committed before each round (the first batches compile code)
LOST_TIMEOUT = 240.0  # the node monitor's grace period (20 s here) and the operator's next look
EVENT_TIMEOUT = 300.0


@dataclass(frozen=True)
class Recovery:
    """One round: seconds from the stop (or delete) to each step; None where it has no such."""

    kind: str  # "restart" or "loss"
    from_node: str  # the driver's node before
    to_node: str  # the new driver's node
    to_lost: float | None  # DriverNodeLost in the App's status (loss only)
    to_running: float  # the new driver pod Running
    to_batch: float  # the first batch it committed


@dataclass(frozen=True)
class NodeLossRun:
    restarts: tuple[Recovery, ...]
    losses: tuple[Recovery, ...]
    executor_cpu: str
    sample_failures: int


def require_stack(state: devstack.StackState | None) -> None:
    """Refuse a stack without node 2 running or without the object store: this benchmark
    changes no stack's shape (it may be shared)."""
    running = state is not None and any(n.name == NODE_2 and n.running for n in state.extra_nodes)
    if not running or state is None or state.object_store is None:
        raise SystemExit(
            f"nodeloss needs a running stack with {NODE_2} and the object store: "
            "`rillet dev up --nodes 2 --object-store`"
        )


def driver_pod(b: benches.Bench, namespace: str, app: str) -> Any | None:
    """The App's driver pod Running and not being deleted, if any."""
    found = [
        p
        for p in observing.pods_of(b.core, namespace, app, "driver")
        if p.status.phase == "Running" and p.metadata.deletion_timestamp is None
    ]
    return found[0] if found else None


def running_driver(b: benches.Bench, namespace: str, app: str) -> Any:
    """The App's driver pod, once Running."""
    return benches.wait_for(
        lambda: driver_pod(b, namespace, app),
        timeout=EVENT_TIMEOUT,
        what=f"the driver of App {app} Running",
    )


def new_driver(b: benches.Bench, namespace: str, app: str, *, old_uid: str) -> Any:
    """Wait for a driver pod other than `old_uid` Running; that pod."""
    return benches.wait_for(
        lambda: (
            pod if (pod := driver_pod(b, namespace, app)) and pod.metadata.uid != old_uid else None
        ),
        timeout=EVENT_TIMEOUT,
        interval=0.2,
        what=f"a new driver of App {app} Running",
    )


def committed_after(watcher: pause.CommitWatcher, moment: float, *, count: int = 1) -> float:
    """The time of the `count`th batch committed after `moment` (monotonic), once there."""

    def probe() -> float | None:
        after = [c for c in watcher.commits if c > moment]
        return after[count - 1] if len(after) >= count else None

    return float(
        benches.wait_for(
            probe, timeout=EVENT_TIMEOUT, interval=pause.SAMPLE_SECONDS, what="batches committed"
        )
    )


def node_lost(b: benches.Bench, namespace: str, app: str) -> bool:
    """The App's Stalled condition True with reason DriverNodeLost."""
    conditions = (observing.app_body(b, namespace, app).get("status") or {}).get("conditions")
    return any(
        c.get("type") == "Stalled"
        and c.get("status") == "True"
        and c.get("reason") == appstatus.DRIVER_NODE_LOST
        for c in conditions or []
    )


def restart(b: benches.Bench, namespace: str, app: str, watcher: pause.CommitWatcher) -> Recovery:
    """Delete the driver pod on its live node; time its successor's first batch."""
    committed_after(watcher, time.monotonic(), count=WARM_COMMITS)
    old = running_driver(b, namespace, app)
    start = time.monotonic()
    b.kubectl("delete", "pod", "-n", namespace, old.metadata.name, "--wait=false")
    pod = new_driver(b, namespace, app, old_uid=old.metadata.uid)
    running = time.monotonic()
    batch = committed_after(watcher, running)
    return Recovery(
        kind="restart",
        from_node=old.spec.node_name,
        to_node=pod.spec.node_name,
        to_lost=None,
        to_running=running - start,
        to_batch=batch - start,
    )


def move_driver(b: benches.Bench, namespace: str, app: str, *, to: str, away_from: str) -> None:
    """The driver started again on node `to` (`away_from` cordoned meanwhile)."""
    old = driver_pod(b, namespace, app)
    if old is not None and old.spec.node_name == to:
        return
    b.kubectl("cordon", away_from)
    try:
        b.kubectl("delete", "pod", "-n", namespace, naming.app_driver_pod_name(app), "--wait=false")
        benches.wait_for(
            lambda: (
                (pod := driver_pod(b, namespace, app))
                and pod.spec.node_name == to
                and (old is None or pod.metadata.uid != old.metadata.uid)
            ),
            timeout=EVENT_TIMEOUT,
            what=f"the driver of App {app} Running on {to}",
        )
    finally:
        b.kubectl("uncordon", away_from)


def lose_node(
    b: benches.Bench, namespace: str, app: str, watcher: pause.CommitWatcher, node_1: str
) -> Recovery:
    """Crash the driver's node 2, taint it out-of-service once the App says DriverNodeLost;
    time the driver's return on node 1. Node 2 is left stopped and tainted."""
    move_driver(b, namespace, app, to=NODE_2, away_from=node_1)
    committed_after(watcher, time.monotonic(), count=WARM_COMMITS)
    old = running_driver(b, namespace, app)
    nodegrowing.stop(_current(), NODE_2)
    start = time.monotonic()
    benches.wait_for(
        lambda: node_lost(b, namespace, app),
        timeout=LOST_TIMEOUT,
        what=f"App {app} Stalled with reason {appstatus.DRIVER_NODE_LOST}",
    )
    lost = time.monotonic()
    b.kubectl("taint", "node", NODE_2, OUT_OF_SERVICE)
    pod = new_driver(b, namespace, app, old_uid=old.metadata.uid)
    running = time.monotonic()
    batch = committed_after(watcher, running)
    return Recovery(
        kind="loss",
        from_node=old.spec.node_name,
        to_node=pod.spec.node_name,
        to_lost=lost - start,
        to_running=running - start,
        to_batch=batch - start,
    )


def bring_back(b: benches.Bench) -> None:
    """Node 2 untainted, running and Ready, as the run found it; the App Stalled no more."""
    key = OUT_OF_SERVICE.split("=")[0]
    if any(t.key == key for t in b.core.read_node(NODE_2).spec.taints or []):
        b.kubectl("taint", "node", NODE_2, f"{OUT_OF_SERVICE}-")
    state = _current()
    if not any(n.name == NODE_2 and n.running for n in state.extra_nodes):
        nodegrowing.start(state, NODE_2)  # returns once the node is Ready


def _current() -> devstack.StackState:
    """The stack's state as saved now (node stop and start save it)."""
    state = devstack.running()
    if state is None:
        raise RuntimeError("the stack stopped during the run")
    return state


def apply_app(
    b: benches.Bench, namespace: str, app: str, *, source: str, target: str, executor_cpu: str
) -> str:
    """The Secret's copy, the Topics and the App with its s3a:// checkpoint; the bucket."""
    env = b.state.environment()
    data = b.core.read_namespaced_secret("rillet-objectstore", "default").data
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET}, "data": data}
    secret["metadata"]["namespace"] = namespace
    documents = manifests.copying_pipeline(
        app,
        namespace,
        b.image,
        source=source,
        target=target,
        partitions=pause.PAUSE_PARTITIONS,
        sleep_ms=NODELOSS_SLEEP_MS,
        executor_cpu=executor_cpu,
        scaling={
            "minExecutors": 1,
            "maxExecutors": 1,
            "executorCores": 1,
            "lagTarget": pause.PAUSE_LAG_TARGET,
        },
    )
    documents[-1]["spec"]["checkpoint"] = {
        "location": f"s3a://{env['RILLET_S3_BUCKET']}/{namespace}/{app}",
        "endpoint": env["RILLET_S3_ENDPOINT"],
        "secretRef": {"name": SECRET},
    }
    b.apply([secret, *documents])
    benches.wait_for(
        lambda: source in b.admin.list_topics(timeout=10).topics,
        timeout=60,
        what=f"topic {source}",
    )
    return env["RILLET_S3_BUCKET"]


def remove_checkpoints(b: benches.Bench, bucket: str, namespace: str) -> None:
    """The run's objects in the bucket (its checkpoints), deleted; never raises."""
    assert b.state.object_store is not None
    try:
        store = objectstoring.s3_client(b.state.object_store)
        listed = store.list_objects(bucket, prefix=f"{namespace}/", recursive=True)
        doomed = [DeleteObject(str(o.object_name)) for o in listed]
        for error in store.remove_objects(bucket, doomed):
            print(f"cleanup: {error}", flush=True)
    except Exception as error:
        print(f"cleanup: the checkpoints in {bucket}/{namespace}/: {error}", flush=True)


def nodeloss(b: benches.Bench, namespace: str) -> NodeLossRun:
    """Run the App steadily; restart its driver, then lose its node, NODELOSS_ROUNDS times each."""
    source, target, app = f"{b.run}-nodeloss-in", f"{b.run}-nodeloss-out", "nodeloss"
    node_1 = b.state.node.name if b.state.node else ""
    free = min(b.free_cpu_millis, benches.free_cpu(b.core, NODE_2))  # the App fits either node
    executor_cpu = dataclasses.replace(b, free_cpu_millis=free).fitting_cpu(1)
    bucket = apply_app(b, namespace, app, source=source, target=target, executor_cpu=executor_cpu)
    group = naming.consumer_group(namespace=namespace, app=app)
    watcher = pause.CommitWatcher(b.bootstrap, group, source, pause.PAUSE_PARTITIONS)
    stop = threading.Event()
    feeder = threading.Thread(target=pause.feed, args=(b.bootstrap, source, stop), daemon=True)
    feeder.start()
    watcher.start()
    restarts, losses = [], []
    try:
        for _ in range(settings.NODELOSS_ROUNDS):
            restarts.append(show(restart(b, namespace, app, watcher)))
        for _ in range(settings.NODELOSS_ROUNDS):
            try:
                losses.append(show(lose_node(b, namespace, app, watcher, node_1)))
            finally:
                bring_back(b)
            benches.wait_for(
                lambda: not node_lost(b, namespace, app),
                timeout=EVENT_TIMEOUT,
                what=f"App {app} no longer {appstatus.DRIVER_NODE_LOST}",
            )
    finally:
        b.kubectl("uncordon", node_1)
        stop.set()
        feeder.join(timeout=60)
        watcher.stop()
        observing.delete_app(b, namespace, app)
        remove_checkpoints(b, bucket, namespace)
    return NodeLossRun(
        restarts=tuple(restarts),
        losses=tuple(losses),
        executor_cpu=executor_cpu,
        sample_failures=watcher.failures,
    )


def show(recovery: Recovery) -> Recovery:
    lost = f"DriverNodeLost at {recovery.to_lost:.1f} s, " if recovery.to_lost else ""
    print(
        f"  nodeloss, {recovery.kind} ({recovery.from_node} -> {recovery.to_node}): {lost}"
        f"driver Running at {recovery.to_running:.1f} s, first batch at {recovery.to_batch:.1f} s",
        flush=True,
    )
    return recovery


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def report(run: NodeLossRun) -> reports.Report:
    """The figures (JSON) and the summary lines."""
    medians = {
        kind: {
            part: _median([getattr(r, part) for r in rounds])
            for part in ("to_lost", "to_running", "to_batch")
        }
        for kind, rounds in (("restart", run.restarts), ("loss", run.losses))
    }
    restart, loss = medians["restart"], medians["loss"]
    ratio = reports.ratio(loss["to_batch"], restart["to_batch"])
    after_lost = [r.to_batch - r.to_lost for r in run.losses if r.to_lost is not None]
    fmt = {
        f"{kind}_{part}": reports.fmt(v) for kind in medians for part, v in medians[kind].items()
    }
    fmt["after_lost"] = reports.fmt(_median(list(after_lost)))
    lines = [
        f"nodeloss: {pause.PAUSE_RATE} records/s over {pause.PAUSE_PARTITIONS} partitions, one "
        f"executor of {run.executor_cpu} CPU, checkpoint in the object store; medians of "
        f"{settings.NODELOSS_ROUNDS} rounds; batches are the consumer group's commits in Kafka",
        f"  restart (driver pod deleted, node up): driver Running {fmt['restart_to_running']} s, "
        f"first batch {fmt['restart_to_batch']} s after the delete",
        f"  node loss (driver's node stopped, tainted out-of-service at DriverNodeLost): "
        f"DriverNodeLost {fmt['loss_to_lost']} s (the node monitor), driver Running on node 1 "
        f"{fmt['loss_to_running']} s, first batch {fmt['loss_to_batch']} s after the stop "
        f"({fmt['after_lost']} s after DriverNodeLost)",
        f"  node loss / restart: {reports.fmt(ratio, 2)}x; commit reads failed "
        f"{run.sample_failures} times",
    ]
    figures: dict[str, Any] = {
        "nodeloss_restart_to_running_median_s": restart["to_running"],
        "nodeloss_restart_to_batch_median_s": restart["to_batch"],
        "nodeloss_loss_to_driver_node_lost_median_s": loss["to_lost"],
        "nodeloss_loss_to_running_median_s": loss["to_running"],
        "nodeloss_loss_to_batch_median_s": loss["to_batch"],
        "nodeloss_loss_after_driver_node_lost_median_s": _median(list(after_lost)),
        "nodeloss_ratio": ratio,
        "nodeloss_rounds": [dataclasses.asdict(r) for r in (*run.restarts, *run.losses)],
    }
    return figures, lines
