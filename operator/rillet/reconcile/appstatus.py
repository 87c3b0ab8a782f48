"""Pure: an App's status from what the operator observed (references, driver pod, progress).

The handler gathers an `AppObservation` (no I/O here); `app_status` turns it into the status in
wire form: a phase, the Ready / Reconciling / Stalled conditions (reconcile.statuses keeps their
transition times), executor counts, per-input partitions and lag, and progress.

Where an App stands, first match wins:
- suspended (spec.suspend): phase Suspended, no condition True (nothing to do, nothing running);
- a spec the driver cannot run: Failed, Stalled (InvalidSpec);
- a referenced Topic or Table missing or not Ready: Pending, Reconciling (WaitingForTopics);
- inputs not co-partitioned: Failed, Stalled (TopicsNotCoPartitioned);
- the App's own Kafka principal not provisioned: Pending, Reconciling (KafkaUnavailable) while
  Kafka cannot be reached, Failed, Stalled (KafkaAccessNotGranted) when it refused the operator,
  and Failed, Stalled (PrincipalExists) when a SCRAM user of its name exists that Rillet did not
  make (no Secret records it): its password and ACLs are left alone;
- the driver's node lost (not Ready): Failed, Stalled (DriverNodeLost, saying what lets a
  second driver start: the node back, or tainted out-of-service; docs/running-on-a-cluster.md);
- the driver's image cannot be pulled: Failed, Stalled (DriverImageUnavailable);
- the driver refusing to start over a lost Table checkpoint: Failed, Stalled (CheckpointLost,
  with the choices it names), from its first exit on; likewise Kafka refusing the App's
  principal a topic (KafkaAccessDenied, naming the principal and the topics), refusing a
  run spec of another contract version (DriverContractMismatch: operator and runtime image
  of different releases, saying which to change), and the schema registry refusing an Avro or
  Protobuf schema (SchemaRegistryRefused, naming the subject, with the registry's message);
- the driver crash-looping: Failed, Stalled (DriverCrashLooping, with its error's last line);
- the driver not ready yet: Pending, Reconciling (DriverStarting), saying what it waits for
  (the scheduler's reason it fits no node, the scheduler, the kubelet, its container);
- the driver reporting failing batches: Running, Reconciling (BatchesFailing);
- the driver running with no executor registered, while it has records to read or executors
  to ask for: Running, Reconciling (ExecutorsUnschedulable with the scheduler's reason, or
  WaitingForExecutors): client-mode Spark runs no task on the driver, so nothing is processed;
- otherwise Running and Ready (Running): it processes records (or has none to read and
  minExecutors 0). Ready is True only here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from rillet.api.v1alpha1 import apps, conditions
from rillet.driverapi import runspecs, terminations
from rillet.reconcile import appobservations, checkpointloss, parallelisms, statuses

WAITING_FOR_TOPICS: Final = "WaitingForTopics"
TOPICS_NOT_CO_PARTITIONED: Final = "TopicsNotCoPartitioned"
INVALID_SPEC: Final = "InvalidSpec"
# An object of the App's (its StatefulSet, Service, ...) exists and Rillet did not make it.
OBJECT_NOT_OWNED: Final = "ObjectNotOwned"
DRIVER_STARTING: Final = "DriverStarting"
DRIVER_CRASH_LOOPING: Final = "DriverCrashLooping"
CHECKPOINT_LOST: Final = "CheckpointLost"
# How the driver's termination message starts when it refused to start (`Type: message`).
CHECKPOINT_LOST_ERROR: Final = f"{checkpointloss.CheckpointLostError.__qualname__}: "
DRIVER_IMAGE_UNAVAILABLE: Final = "DriverImageUnavailable"
DRIVER_NODE_LOST: Final = "DriverNodeLost"
BATCHES_FAILING: Final = "BatchesFailing"
# The driver runs but no executor is registered with it: client-mode Spark runs no task on the
# driver, so such an App processes nothing (Ready False). Unschedulable when the scheduler said
# no node fits the executor pods (its message says why), waiting otherwise (starting).
WAITING_FOR_EXECUTORS: Final = "WaitingForExecutors"
EXECUTORS_UNSCHEDULABLE: Final = "ExecutorsUnschedulable"
# The App's own Kafka principal could not be provisioned: Kafka unreachable (it may come back),
# or Kafka refused the operator (its rights need fixing).
KAFKA_UNAVAILABLE: Final = "KafkaUnavailable"
KAFKA_ACCESS_NOT_GRANTED: Final = "KafkaAccessNotGranted"
PRINCIPAL_EXISTS: Final = "PrincipalExists"
# Kafka refused the App's principal something it does: how the driver's termination message
# starts then (runtime.queries.kafkalogin.ACCESS_DENIED).
KAFKA_ACCESS_DENIED: Final = "KafkaAccessDenied"
KAFKA_ACCESS_DENIED_ERROR: Final = f"{KAFKA_ACCESS_DENIED}: "
# The driver refused a run spec of another contract version (the operator and the App's
# runtime image come from different releases): how its termination message starts then.
DRIVER_CONTRACT_MISMATCH: Final = "DriverContractMismatch"
CONTRACT_MISMATCH_ERROR: Final = f"{runspecs.ContractMismatchError.__qualname__}: "
# The schema registry refused an Avro or Protobuf schema of the App (incompatible with its
# subject, or a subject or version missing): how the driver's termination message starts then.
SCHEMA_REGISTRY_REFUSED: Final = "SchemaRegistryRefused"
SCHEMA_REGISTRY_REFUSED_ERROR: Final = f"{terminations.SchemaRegistryRefusedError.__qualname__}: "
RUNNING: Final = "Running"
SUSPENDED: Final = "Suspended"

# Container waiting reasons that need a new image (or registry access) from the user.
IMAGE_PROBLEMS: Final = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName"})


@dataclass(frozen=True)
class Standing:
    """The phase of the App and the verdict its conditions are derived from."""

    phase: apps.Phase
    verdict: statuses.Verdict


def _phrase(items: Iterable[str], suffix: str) -> list[str]:
    return [f"{item} {suffix}" for item in items]


def _waiting(observation: appobservations.AppObservation) -> Standing | None:
    missing = _phrase(observation.missing_references, "not found")
    unready = _phrase(observation.unready_references, "not Ready")
    if not missing and not unready:
        return None
    message = f"waiting for {', '.join([*missing, *unready])}"
    return Standing("Pending", statuses.Verdict("progressing", WAITING_FOR_TOPICS, message))


def _spec_standing(observation: appobservations.AppObservation) -> Standing | None:
    if observation.spec_problems:
        message = "; ".join(observation.spec_problems)
        return Standing("Failed", statuses.Verdict("stalled", INVALID_SPEC, message))
    waiting = _waiting(observation)
    if waiting is not None:
        return waiting
    if observation.copartitioning_problems:
        message = "; ".join(observation.copartitioning_problems)
        return Standing("Failed", statuses.Verdict("stalled", TOPICS_NOT_CO_PARTITIONED, message))
    if observation.blocking_problem is not None:
        reason, message = observation.blocking_problem
        if reason == KAFKA_UNAVAILABLE:
            return Standing("Pending", statuses.Verdict("progressing", reason, message))
        return Standing("Failed", statuses.Verdict("stalled", reason, message))
    return None


def _crash_message(driver: appobservations.DriverObservation) -> str:
    line = terminations.error_line(driver.last_message)
    code = f" (exit code {driver.last_exit_code})" if driver.last_exit_code is not None else ""
    if line is None:
        return f"the driver exited{code} {driver.restart_count} times; see its logs"
    return f"{line}{code}"


# What a driver that refused to go on says first in its termination message, and the reason.
_REFUSALS: Final = (
    (CHECKPOINT_LOST_ERROR, CHECKPOINT_LOST),
    (KAFKA_ACCESS_DENIED_ERROR, KAFKA_ACCESS_DENIED),
    (CONTRACT_MISMATCH_ERROR, DRIVER_CONTRACT_MISMATCH),
    (SCHEMA_REGISTRY_REFUSED_ERROR, SCHEMA_REGISTRY_REFUSED),
)


def _driver_standing(driver: appobservations.DriverObservation | None) -> Standing | None:
    """Where the driver pod stands, or None when it runs and is ready."""
    if driver is None:
        message = "waiting for the driver pod to be created"
        return Standing("Pending", statuses.Verdict("progressing", DRIVER_STARTING, message))
    if driver.node_lost:
        verdict = statuses.Verdict("stalled", DRIVER_NODE_LOST, _node_lost(driver.node_name))
        return Standing("Failed", verdict)
    if driver.waiting_reason in IMAGE_PROBLEMS:
        message = (
            f"{driver.waiting_reason}: {driver.waiting_message or 'the image cannot be pulled'}"
        )
        return Standing("Failed", statuses.Verdict("stalled", DRIVER_IMAGE_UNAVAILABLE, message))
    running = driver.phase == "Running" and driver.ready
    for prefix, reason in _REFUSALS:
        if not running and (driver.last_message or "").startswith(prefix):
            message = (driver.last_message or "").removeprefix(prefix).strip()
            return Standing("Failed", statuses.Verdict("stalled", reason, message))
    if driver.waiting_reason == "CrashLoopBackOff":
        verdict = statuses.Verdict("stalled", DRIVER_CRASH_LOOPING, _crash_message(driver))
        return Standing("Failed", verdict)
    if driver.phase == "Running" and driver.ready:
        return None
    return Standing("Pending", statuses.Verdict("progressing", DRIVER_STARTING, _starting(driver)))


def _node_lost(node: str | None) -> str:
    # A partition looks like a crash from here, so Kubernetes starts no second driver while the
    # first may still run (and write the checkpoint): only who knows the node is off may say so.
    return (
        f"the driver's node {node} is not Ready: Kubernetes starts no second driver while the "
        "first may still run. The driver resumes when the node returns; if the node is off, "
        f"taint it: kubectl taint node {node} "
        "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
    )


def _starting(driver: appobservations.DriverObservation) -> str:
    if driver.restart_count and driver.last_message:
        return f"the driver is restarting after: {_crash_message(driver)}"
    if (
        driver.waiting_reason == appobservations.UNSCHEDULABLE
    ):  # e.g. too little CPU, a taint: the user acts
        said = f": {driver.waiting_message}" if driver.waiting_message else ""
        return f"the driver pod cannot be scheduled yet{said}"
    if driver.phase == "Pending" and driver.waiting_reason is None:
        # Neither the scheduler nor the kubelet has said anything yet: say which one it waits
        # for, which is what to look at when it lasts (a scheduler or kubelet stuck or gone).
        if driver.node_name:
            return f"the driver pod is waiting for the kubelet of node {driver.node_name}"
        return "the driver pod is waiting for the scheduler"
    detail = driver.waiting_reason or driver.phase
    return f"the driver is starting ({detail})"


def _running(observation: appobservations.AppObservation) -> Standing:
    if observation.batch_error:
        verdict = statuses.Verdict("progressing", BATCHES_FAILING, observation.batch_error)
        return Standing("Running", verdict)
    if _processes_nothing(observation):
        reason = EXECUTORS_UNSCHEDULABLE if observation.executors_unschedulable else None
        verdict = statuses.Verdict(
            "progressing", reason or WAITING_FOR_EXECUTORS, _progress(observation)
        )
        return Standing("Running", verdict)
    return Standing("Running", statuses.Verdict("ready", RUNNING, _progress(observation)))


def registered_executors(observation: appobservations.AppObservation) -> int:
    """Executors registered with the driver, as it reports them; until its first report, the
    executor pods running."""
    if observation.executors_registered is not None:
        return observation.executors_registered
    return observation.executors_ready or 0


def _processes_nothing(observation: appobservations.AppObservation) -> bool:
    """No executor to run a task, while there is work: records to read, or executors wanted."""
    if registered_executors(observation) > 0:
        return False
    idle = observation.executors_desired == 0 and not total_lag(observation.inputs)
    return not idle


def _progress(observation: appobservations.AppObservation) -> str:
    parts = ["the driver is running"]
    if observation.executors_ready is not None:
        desired = observation.executors_desired
        ready = f"{registered_executors(observation)}/{desired} executors ready"
        if unplaced := observation.executors_unschedulable:
            ready += f" ({unplaced.count} cannot be scheduled: {unplaced.message})"
        if observation.executors_lost:
            ready += f" ({observation.executors_lost} lost with their node)"
        parts.append(ready)
    lag = total_lag(observation.inputs)
    if lag is not None:
        parts.append(f"lag {lag} records")
    return ", ".join(parts)


def derive_standing(observation: appobservations.AppObservation) -> Standing:
    """Where the App stands (see the module docstring for the order)."""
    if observation.suspend:
        message = "spec.suspend is true: the driver and executors are stopped"
        return Standing("Suspended", statuses.Verdict("paused", SUSPENDED, message))
    return (
        _spec_standing(observation) or _driver_standing(observation.driver) or _running(observation)
    )


def derive_conditions(
    standing: Standing,
    *,
    generation: int | None,
    previous: Iterable[Mapping[str, Any]] | None,
    now: datetime,
) -> list[dict[str, Any]]:
    """The three conditions of the App, transition times kept for unchanged statuses.

    A suspended App is neither Reconciling nor Stalled, and has no Ready condition: nothing runs,
    so it is not Ready, but Ready False would make kstatus (Flux) call it InProgress for as long
    as it is suspended, hanging health checks (docs/health.md).
    """
    derived = statuses.derive_conditions(
        standing.verdict, generation=generation, previous=list(previous or ()), now=now
    )
    if standing.verdict.state != "paused":
        return derived
    return [c for c in derived if c["type"] != conditions.READY]


def total_partitions(inputs: Iterable[appobservations.InputObservation]) -> int | None:
    """The partitions of all inputs; None while any is unknown."""
    return parallelisms.total_partitions(i.partitions for i in inputs)


def total_lag(inputs: Iterable[appobservations.InputObservation]) -> int | None:
    """The lag over the inputs whose lag is known; None when none is."""
    lags = [i.lag for i in inputs if i.lag is not None]
    return sum(lags) if lags else None


def _timestamp(moment: datetime) -> str:
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _without_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _executors(observation: appobservations.AppObservation) -> dict[str, Any] | None:
    executors = _without_none(
        {
            "desired": observation.executors_desired,
            "ready": observation.executors_ready,
            "cap": observation.executors_cap or None,
            "capBy": observation.executors_cap_by if observation.executors_cap else None,
            "lost": observation.executors_lost or None,
            "nodes": [{"name": n, "running": c} for n, c in observation.executors_by_node] or None,
        }
    )
    return executors or None


def _inputs(observation: appobservations.AppObservation) -> list[dict[str, Any]] | None:
    listed = [
        _without_none({"name": i.name, "topic": i.topic, "partitions": i.partitions, "lag": i.lag})
        for i in observation.inputs
    ]
    return listed or None


def app_status(
    observation: appobservations.AppObservation,
    *,
    previous: Mapping[str, Any] | None,
    now: datetime,
) -> dict[str, Any]:
    """The App's status in wire form (camelCase, unset fields left out).

    `previous` is the current status (for condition transition times); diff the result against
    it with statuses.merge_patch to write only what changed.
    """
    standing = derive_standing(observation)
    rows = observation.rows_per_second
    status = {
        "observedGeneration": observation.generation,
        "conditions": derive_conditions(
            standing,
            generation=observation.generation,
            previous=(previous or {}).get("conditions"),
            now=now,
        ),
        "phase": standing.phase,
        "partitions": total_partitions(observation.inputs),
        "statePartitions": observation.state_partitions,
        "executors": _executors(observation),
        "inputs": _inputs(observation),
        "lag": total_lag(observation.inputs),
        "lastBatchTime": _timestamp(observation.last_batch_time)
        if observation.last_batch_time
        else None,
        # One decimal: a status write per batch for a rate moving in its noise is not worth it.
        "rowsPerSecond": round(rows, 1) if rows is not None else None,
    }
    return _without_none(status)


def is_ready(status: Mapping[str, Any]) -> bool:
    """Whether a derived status says Ready=True."""
    return any(
        c.get("type") == conditions.READY and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
