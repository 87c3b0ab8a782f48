"""Pure: what the operator sees of an App, read into the observations `appstatus` works from.

A purely computational module over wire-form data (the dicts the apiserver returns and kopf's
indexes keep), so the scaling loop reads hundreds of Apps without building API models:
- `references` and `check_references`: the Topics and Tables an App names, and which of them
  are missing or not Ready;
- `stream_inputs`: the Kafka topic each input read as a stream reads;
- `copartitioning_problems`: stream inputs, or the Tables the App writes, whose partition counts
  differ;
- `known_parallelism`: the partitions the App's status last reported, which a new driver starts
  its executors within;
- `driver_observation`, `count_running_executors`, `executors_by_node`,
  `unschedulable_executors`: the driver pod and the executor pods (the progress annotation the
  driver writes on its pod is read by `driverapi.reports`);
- `lost_nodes`, `count_lost_executors`: the nodes not Ready, and the executors lost with them.

The observations themselves (`AppObservation` and its parts) are defined here too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from rillet.api.v1alpha1 import conditions
from rillet.reconcile import parallelisms
from rillet.reconcile.appobjects import drivers

# The PodScheduled condition's reason when no node fits the pod (its message says why).
UNSCHEDULABLE: Final = "Unschedulable"


@dataclass(frozen=True, kw_only=True)
class DriverObservation:
    """The driver pod and its container, as last seen."""

    phase: str  # the Pod's phase: Pending, Running, Succeeded, Failed or Unknown
    ready: bool = False
    restart_count: int = 0
    waiting_reason: str | None = None  # e.g. CrashLoopBackOff, ImagePullBackOff
    waiting_message: str | None = None
    last_exit_code: int | None = None  # lastState.terminated (or state.terminated)
    last_message: str | None = None  # its message: the log tail (FallbackToLogsOnError)
    node_name: str | None = None  # the node the scheduler bound the pod to, once it did
    node_lost: bool = False  # that node is not Ready: unreachable, or down


@dataclass(frozen=True, kw_only=True)
class InputObservation:
    """One stream input: its topic, partitions and lag, where known."""

    name: str
    topic: str
    partitions: int | None = None
    lag: int | None = None


@dataclass(frozen=True)
class UnschedulableExecutors:
    """Executor pods no node fits, and the scheduler's reason for one of them."""

    count: int
    message: str


@dataclass(frozen=True, kw_only=True)
class AppObservation:
    """Everything the status of one App is derived from."""

    generation: int | None
    suspend: bool = False
    spec_problems: tuple[str, ...] = ()  # e.g. runparts.UnresolvedError problems other than missing
    missing_references: tuple[str, ...] = ()  # e.g. "Topic clicks"
    unready_references: tuple[str, ...] = ()
    copartitioning_problems: tuple[str, ...] = ()
    # Why the App's Kafka principal is not provisioned: (KAFKA_UNAVAILABLE or
    # KAFKA_ACCESS_NOT_GRANTED, message); the driver is not (re)started meanwhile.
    blocking_problem: tuple[str, str] | None = None
    driver: DriverObservation | None = None  # None: no driver pod (yet)
    batch_error: str | None = None  # the driver's last batch failure, while it still runs
    executors_desired: int | None = None
    executors_ready: int | None = None
    executors_unschedulable: UnschedulableExecutors | None = None
    executors_cap: int | None = None  # 0 or None: unknown (parallelisms.derive_cap)
    executors_cap_by: str | None = None  # parallelisms.INPUT_PARTITIONS or STATE_PARTITIONS
    # Executors registered with the driver, as it reports them (None: not reported yet).
    executors_registered: int | None = None
    # Executor pods running, by node (sorted), and those on nodes lost (not Ready).
    executors_by_node: tuple[tuple[str, int], ...] = ()
    executors_lost: int = 0
    state_partitions: int | None = None  # of its stateful queries, as its driver reported
    inputs: tuple[InputObservation, ...] = ()
    last_batch_time: datetime | None = None
    rows_per_second: float | None = None


ReferenceKind = Literal["Topic", "Table"]
Reference = tuple[ReferenceKind, str]


def _name(ref: Any) -> str | None:
    return str(ref["name"]) if isinstance(ref, Mapping) and ref.get("name") else None


def references(spec: Mapping[str, Any]) -> tuple[Reference, ...]:
    """The Topics and Tables an App's spec names (inputs, outputs, dead letters), in order."""
    found: list[Reference] = []
    for item in [*(spec.get("inputs") or ()), *(spec.get("outputs") or ())]:
        for key, kind in (("topicRef", "Topic"), ("tableRef", "Table")):
            name = _name(item.get(key))
            if name:
                found.append((kind, name))  # type: ignore[arg-type]
    dead_letter = _name((spec.get("deadLetterTopic") or {}).get("topicRef"))
    if dead_letter:
        found.append(("Topic", dead_letter))
    return tuple(dict.fromkeys(found))


def written_tables(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The Tables an App writes (its tableRef outputs)."""
    names = (_name(output.get("tableRef")) for output in spec.get("outputs") or ())
    return tuple(dict.fromkeys(name for name in names if name))


def is_ready(body: Mapping[str, Any]) -> bool:
    """Whether an object's Ready condition is True."""
    found = (body.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == conditions.READY and c.get("status") == "True" for c in found)


@dataclass(frozen=True)
class ReferenceCheck:
    """References that do not exist, and those that exist but are not Ready ("Topic clicks")."""

    missing: tuple[str, ...] = ()
    unready: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unready


def check_references(
    wanted: Iterable[Reference], bodies: Mapping[Reference, Mapping[str, Any]]
) -> ReferenceCheck:
    """Which of `wanted` are not among `bodies`, and which are there but not Ready."""
    missing, unready = [], []
    for kind, name in wanted:
        body = bodies.get((kind, name))
        if body is None:
            missing.append(f"{kind} {name}")
        elif not is_ready(body):
            unready.append(f"{kind} {name}")
    return ReferenceCheck(missing=tuple(missing), unready=tuple(unready))


@dataclass(frozen=True)
class StreamInput:
    """An input read as a stream: its view name, the Kafka topic it reads, and whether a new
    App reads it from the earliest offsets (startingOffsets: earliest)."""

    name: str
    topic: str
    from_start: bool = False
    declared_partitions: int | None = None  # as its Topic declares them (None: external)


def stream_inputs(
    spec: Mapping[str, Any],
    kafka_names: Mapping[str, str],
    declared: Mapping[str, int | None] | None = None,
) -> tuple[StreamInput, ...]:
    """The App's stream inputs (topicRef and external), with Kafka topic names.

    `kafka_names` maps Topic object names to their Kafka topics, `declared` to their declared
    partitions; an input naming a Topic not in it is left out (the App waits for that Topic
    anyway). Table inputs are read as a whole at each batch, not as a stream: they have no lag.
    """
    found = []
    for item in spec.get("inputs") or ():
        topic_ref = _name(item.get("topicRef"))
        external = (item.get("external") or {}).get("topicName")
        topic = kafka_names.get(topic_ref) if topic_ref else external
        if topic:
            from_start = item.get("startingOffsets") == "earliest"
            partitions = _count((declared or {}).get(topic_ref)) if topic_ref else None
            found.append(
                StreamInput(
                    name=str(item["name"]),
                    topic=str(topic),
                    from_start=from_start,
                    declared_partitions=partitions,
                )
            )
    return tuple(found)


def declared_partitions(inputs: Iterable[StreamInput]) -> int | None:
    """The partitions the inputs' Topics declare; None unless every input declares them."""
    return parallelisms.total_partitions(i.declared_partitions for i in inputs)


def copartitioning_problems(
    inputs: Sequence[tuple[str, int | None]], tables: Sequence[tuple[str, int | None]]
) -> tuple[str, ...]:
    """Why the stream inputs and the written Tables are not co-partitioned (unknown counts pass).

    `inputs` are (input name, partitions), `tables` (Table name, partitions).
    """
    known = [(name, count) for name, count in inputs if count]
    counts = {count for _, count in known}
    if len(counts) > 1:
        listed = ", ".join(f"{name} has {count}" for name, count in known)
        return (
            f"the stream inputs have different partition counts ({listed}): give their topics "
            "the same number of partitions",
        )
    if not counts:
        return ()
    (expected,) = counts
    return tuple(
        f"Table {name} has {count} partitions but the inputs have {expected}: set its "
        f"spec.partitions to {expected} (or remove it to follow the inputs)"
        for name, count in tables
        if count and count != expected
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def known_parallelism(status: Mapping[str, Any] | None) -> parallelisms.Parallelism:
    """What an App's status last said its stages run at once: the input partitions Kafka
    reported and the state partitions its driver reported (None where not said). Partitions
    only grow, so a driver started within these is within today's cap too."""
    status = status or {}
    return parallelisms.Parallelism(
        input_partitions=_count(status.get("partitions")),
        state_partitions=_count(status.get("statePartitions")),
    )


def _container(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    chosen = [s for s in statuses if s.get("name") == drivers.DRIVER_CONTAINER] or statuses
    return chosen[0] if chosen else {}


def _unschedulable(pod: Mapping[str, Any]) -> tuple[str | None, str | None]:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return condition.get("reason"), condition.get("message")
    return None, None


def driver_observation(
    pod: Mapping[str, Any], *, lost_nodes: Collection[str] = frozenset()
) -> DriverObservation:
    """The driver pod as appstatus reads it: phase, readiness, restarts, last words, and
    whether its node is among `lost_nodes`."""
    container = _container(pod)
    state = container.get("state") or {}
    waiting = state.get("waiting") or {}
    terminated = (
        (container.get("lastState") or {}).get("terminated") or state.get("terminated") or {}
    )
    reason, message = waiting.get("reason"), waiting.get("message")
    if not container:  # not started yet: say why when the scheduler said
        reason, message = _unschedulable(pod)
    return DriverObservation(
        phase=str((pod.get("status") or {}).get("phase") or "Pending"),
        ready=bool(container.get("ready"))
        and not (pod.get("metadata") or {}).get("deletionTimestamp"),
        restart_count=int(container.get("restartCount") or 0),
        waiting_reason=reason,
        waiting_message=message,
        last_exit_code=terminated.get("exitCode"),
        last_message=terminated.get("message"),
        node_name=_node_of(pod),
        node_lost=_node_of(pod) in lost_nodes,
    )


def unschedulable_executors(pods: Iterable[Mapping[str, Any]]) -> UnschedulableExecutors | None:
    """The executor pods no node fits (Spark keeps asking for them), with the scheduler's
    reason for one: what a user needs to free or resize. None when every pod was placed."""
    messages = []
    for pod in pods:
        reason, message = _unschedulable(pod)
        if reason == UNSCHEDULABLE and not (pod.get("metadata") or {}).get("deletionTimestamp"):
            messages.append(message or "the scheduler gave no reason")
    return UnschedulableExecutors(len(messages), messages[0]) if messages else None


def _node_of(pod: Mapping[str, Any]) -> str | None:
    node = (pod.get("spec") or {}).get("nodeName")
    return str(node) if node else None


def _running(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not (
        pod.get("metadata") or {}
    ).get("deletionTimestamp")


def count_running_executors(
    pods: Iterable[Mapping[str, Any]], *, lost_nodes: Collection[str] = frozenset()
) -> int:
    """Executor pods Running, not being deleted, and not on a node lost."""
    return sum(1 for pod in pods if _running(pod) and _node_of(pod) not in lost_nodes)


def executors_by_node(
    pods: Iterable[Mapping[str, Any]], *, lost_nodes: Collection[str] = frozenset()
) -> tuple[tuple[str, int], ...]:
    """How many executor pods run on each node (those `count_running_executors` counts)."""
    nodes = Counter(
        _node_of(pod) for pod in pods if _running(pod) and _node_of(pod) not in lost_nodes
    )
    return tuple(sorted((node, count) for node, count in nodes.items() if node))


def count_lost_executors(pods: Iterable[Mapping[str, Any]], *, lost_nodes: Collection[str]) -> int:
    """Executor pods on a node lost that have not ended: Spark has lost them, and Kubernetes
    keeps them (Terminating, once evicted) until that node returns or is known to be down."""
    return len(lost_executor_pods(pods, lost_nodes=lost_nodes))


def lost_executor_pods(
    pods: Iterable[Mapping[str, Any]], *, lost_nodes: Collection[str]
) -> tuple[tuple[str, str], ...]:
    """The (name, uid) of the executor pods `count_lost_executors` counts."""
    found = []
    for pod in pods:
        ended = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if _node_of(pod) in lost_nodes and not ended:
            meta = pod.get("metadata") or {}
            found.append((str(meta.get("name")), str(meta.get("uid"))))
    return tuple(found)


def lost_nodes(nodes: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The nodes whose Ready condition is Unknown: their kubelet stopped reporting (down, or cut
    off, which the control plane cannot tell apart). A node Ready False is not lost: its kubelet
    reports, and runs or stops its pods itself."""
    lost = set()
    for node in nodes:
        found = (node.get("status") or {}).get("conditions") or ()
        ready = [c for c in found if c.get("type") == "Ready"]
        if ready and ready[0].get("status") == "Unknown":
            lost.add(str((node.get("metadata") or {}).get("name")))
    return frozenset(lost)
