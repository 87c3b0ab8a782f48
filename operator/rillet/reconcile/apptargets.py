"""Pure: the scaling loop's pass over one App (`handlers.appscaling`), from what it read.

Which Apps a pass scales (settled, not suspended, not held back by their spec or references)
and which it reconciles again instead; each scaled App's target (stream inputs and consumer
group), its pods, its inputs' partitions and lag, what its stages run at once, and what the pass
concludes (`derive_pass`): the decision of `scaling.plan_executors`, the status, the Events and
the driver pod's `rillet.io/executors-desired` annotation (`driverapi.desires`), which is how
the driver learns the count.
The pass reads Kafka and the pods and keeps the history; this module only combines what it read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol

from rillet.api.v1alpha1 import appresources
from rillet.driverapi import desires, reports
from rillet.reconcile import (
    appnotes,
    appobservations,
    appresolving,
    appstatus,
    naming,
    notes,
    parallelisms,
    scaling,
    scalingdecisions,
    statuses,
)
from rillet.reconcile.appobjects import metadata

# Where an App stands because of its spec and references (not its driver): the scaling loop
# reconciles such an App again, since no event of its own would.
SPEC_REASONS: Final = frozenset(
    {
        appstatus.INVALID_SPEC,
        appstatus.WAITING_FOR_TOPICS,
        appstatus.TOPICS_NOT_CO_PARTITIONED,
        appstatus.KAFKA_UNAVAILABLE,
        appstatus.KAFKA_ACCESS_NOT_GRANTED,
        appstatus.PRINCIPAL_EXISTS,
    }
)

PodKey = tuple[str, str, str]  # namespace, app, role


class Lag(Protocol):
    """One input topic of one consumer group, as Kafka told (`kafka.lag.TopicLag`)."""

    @property
    def partitions(self) -> int | None: ...

    @property
    def lag(self) -> int | None: ...


def standing_reason(body: Mapping[str, Any]) -> str | None:
    """The reason of the App's Ready condition, as last written."""
    return appnotes.ready_condition(body.get("status")).get("reason")


def is_scalable(body: Mapping[str, Any]) -> bool:
    """Settled, not suspended, and not held back by its spec or references."""
    suspended = bool((body.get("spec") or {}).get("suspend"))
    return statuses.is_due(body) and not suspended and standing_reason(body) not in SPEC_REASONS


def needs_reconcile(body: Mapping[str, Any]) -> bool:
    """Settled but held back by its spec or references: a reconcile may now get further."""
    return statuses.is_due(body) and standing_reason(body) in SPEC_REASONS


@dataclass(frozen=True)
class Target:
    """One App to scale: its body, consumer group and stream inputs."""

    body: Mapping[str, Any]
    group: str
    inputs: tuple[appobservations.StreamInput, ...]

    @property
    def key(self) -> tuple[str, str]:
        meta = self.body["metadata"]
        return str(meta["namespace"]), str(meta["name"])


def target_of(body: Mapping[str, Any], views: appresolving.ObjectViews) -> Target:
    """The App with the Kafka topics of its stream inputs (from the Topics index)."""
    meta, spec = body["metadata"], body.get("spec") or {}
    namespace, name = str(meta["namespace"]), str(meta["name"])
    kafka_names: dict[str, str] = {}
    declared: dict[str, int | None] = {}
    for kind, ref in appobservations.references(spec):
        topic = views.topic(namespace, ref) if kind == "Topic" else None
        if topic is not None:
            topic_spec = topic.get("spec") or {}
            kafka_names[ref] = views.kafka_name("Topic", topic)
            declared[ref] = topic_spec.get("partitions")
    return Target(
        body=body,
        group=naming.consumer_group(namespace=namespace, app=name),
        inputs=appobservations.stream_inputs(spec, kafka_names, declared),
    )


def policy_of(
    spec: Mapping[str, Any], *, quota: int | None = None
) -> scalingdecisions.ScalingPolicy:
    """The App's scaling policy (spec.scaling as the apiserver defaulted it, within the
    operator's `quota` of executors per App)."""
    declared = appresources.Scaling.model_validate(spec.get("scaling") or {})
    return scalingdecisions.policy_for(declared, quota=quota)


def group_pods(pods: Sequence[Mapping[str, Any]]) -> dict[PodKey, list[Mapping[str, Any]]]:
    """Pods by (namespace, App, role)."""
    grouped: dict[PodKey, list[Mapping[str, Any]]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        key = (
            str(meta.get("namespace")),
            str(labels.get(metadata.APP_LABEL)),
            str(labels.get(metadata.ROLE_LABEL)),
        )
        grouped.setdefault(key, []).append(pod)
    return grouped


def observe_inputs(
    target: Target, lags: Mapping[tuple[str, str], Lag]
) -> tuple[appobservations.InputObservation, ...]:
    """The App's stream inputs with their partitions and lag (unknown where Kafka said none)."""
    found = [(i, lags.get((target.group, i.topic))) for i in target.inputs]
    return tuple(
        appobservations.InputObservation(
            name=i.name,
            topic=i.topic,
            partitions=o.partitions if o is not None else None,
            lag=o.lag if o is not None else None,
        )
        for i, o in found
    )


def driver_pod(
    target: Target, pods: Mapping[PodKey, list[Mapping[str, Any]]]
) -> Mapping[str, Any] | None:
    """The App's driver pod, if there is one."""
    namespace, name = target.key
    drivers = pods.get((namespace, name, "driver"), [])
    return drivers[0] if drivers else None


def parallelism_of(
    target: Target,
    inputs: tuple[appobservations.InputObservation, ...],
    driver: Mapping[str, Any] | None,
) -> parallelisms.Parallelism:
    """What the App's stages run at once: the input partitions Kafka reports, else those last
    reported (Kafka unreachable), else those its Topics declare; the state partitions its
    driver reports, else those last reported."""
    known = appobservations.known_parallelism(target.body.get("status"))
    partitions = (
        appstatus.total_partitions(inputs)
        or known.input_partitions
        or appobservations.declared_partitions(target.inputs)
    )
    state = reports.read_progress(driver).state_partitions or known.state_partitions
    return parallelisms.Parallelism(input_partitions=partitions, state_partitions=state)


def observe(
    target: Target,
    inputs: tuple[appobservations.InputObservation, ...],
    decision: scalingdecisions.ScalingDecision,
    pods: Mapping[PodKey, list[Mapping[str, Any]]],
    parallelism: parallelisms.Parallelism | None = None,
    *,
    lost_nodes: frozenset[str] = frozenset(),
) -> appobservations.AppObservation:
    """What the scaling pass saw of one App, and what it decided. `lost_nodes`: the nodes not
    Ready (`appobservations.lost_nodes`)."""
    namespace, name = target.key
    driver = driver_pod(target, pods)
    executors = pods.get((namespace, name, "executor"), [])
    progress = reports.read_progress(driver)
    lost = lost_nodes  # short: it is passed five times below
    return appobservations.AppObservation(
        generation=target.body["metadata"].get("generation"),
        driver=appobservations.driver_observation(driver, lost_nodes=lost) if driver else None,
        executors_desired=decision.desired,
        executors_ready=appobservations.count_running_executors(executors, lost_nodes=lost),
        executors_by_node=appobservations.executors_by_node(executors, lost_nodes=lost),
        executors_lost=appobservations.count_lost_executors(executors, lost_nodes=lost),
        executors_unschedulable=appobservations.unschedulable_executors(executors),
        executors_cap=decision.cap,
        executors_cap_by=decision.cap_by,
        executors_registered=progress.executors,
        state_partitions=parallelism.state_partitions if parallelism else None,
        inputs=inputs,
        last_batch_time=progress.last_batch_time,
        rows_per_second=progress.rows_per_second,
    )


@dataclass(frozen=True)
class Pass:
    """What a scaling pass concluded about one App, and the history for its next pass.
    `released`: the (name, uid) of executor pods to delete at once (`released_executors`);
    `driver_patch`: (driver pod name, merge patch) when its desired count is not the decision."""

    report: notes.Report
    history: tuple[scalingdecisions.Recommendation, ...]
    released: tuple[tuple[str, str], ...] = ()
    driver_patch: tuple[str, dict[str, Any]] | None = None


def released_executors(
    target: Target,
    pods: Mapping[PodKey, list[Mapping[str, Any]]],
    lost_nodes: frozenset[str],
) -> tuple[tuple[str, str], ...]:
    """The executor pods on lost nodes to delete at once, once the App's status has said they
    are lost (a pass earlier): Spark counts such a pod as running for as long as it exists, and
    it exists (Terminating) until its node returns, so no executor would replace it. Deleting it
    is safe where deleting a driver is not: Spark has given its tasks to others, and a zombie
    executor's open transactions are fenced by their successors. Only while the driver's node is
    not lost: an App whose driver is lost waits for it anyway, and a checkpoint volume's executors
    run beside the driver only (so theirs is lost with it: new ones could start nowhere else)."""
    if not ((target.body.get("status") or {}).get("executors") or {}).get("lost"):
        return ()
    driver = driver_pod(target, pods)
    if driver is None or (driver.get("spec") or {}).get("nodeName") in lost_nodes:
        return ()
    namespace, name = target.key
    executors = pods.get((namespace, name, "executor"), [])
    return appobservations.lost_executor_pods(executors, lost_nodes=lost_nodes)


def derive_pass(
    target: Target,
    lags: Mapping[tuple[str, str], Lag],
    pods: Mapping[PodKey, list[Mapping[str, Any]]],
    *,
    history: tuple[scalingdecisions.Recommendation, ...],
    now: float,
    at: datetime,
    lost_nodes: frozenset[str] = frozenset(),
    max_executors_per_app: int | None = None,
) -> Pass:
    """One App's pass: its inputs and pods observed, its executors decided, its status and
    Events derived. `now`: the scaling decision's monotonic clock; `at`: the status's time;
    `lost_nodes`: the nodes not Ready; `max_executors_per_app`: the operator's quota."""
    body = target.body
    previous = body.get("status") or {}
    inputs = observe_inputs(target, lags)
    before = (previous.get("executors") or {}).get("desired")
    driver = driver_pod(target, pods)
    parallelism = parallelism_of(target, inputs, driver)
    decision = scaling.plan_executors(
        policy_of(body.get("spec") or {}, quota=max_executors_per_app),
        partitions=parallelism,
        lag=appstatus.total_lag(inputs),
        history=history,
        current=before,
        now=now,
    )
    observation = observe(target, inputs, decision, pods, parallelism, lost_nodes=lost_nodes)
    status = appstatus.app_status(observation, previous=previous, now=at)
    posted = (
        appnotes.scale_note(before, decision)
        + appnotes.standing_notes(previous, appstatus.derive_standing(observation))
        + appnotes.lost_executors_note(previous, observation)
    )
    patch = desires.desired_patch(driver, decision.desired)
    return Pass(
        notes.Report(statuses.merge_patch(previous, status), posted),
        decision.history,
        released_executors(target, pods, lost_nodes),
        driver_patch=(str(driver["metadata"]["name"]), patch) if driver and patch else None,
    )
