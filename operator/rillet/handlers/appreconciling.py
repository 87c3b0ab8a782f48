"""The one reconcile flow of an App: resolve, check, build, apply, observe, report.

Used by the kopf handlers (create, update, resume) and by the scaling loop for Apps that wait
for their Topics and Tables (nothing about the App changes when a Topic appears, so no handler
would run). A reconcile yields an `AppReport`: the status merge patch (empty when nothing
changed) and the Events to post, one per change.

- Resolve (`resolve`, no I/O: kopf's indexes and pure builders): the App model, its references
  (missing or not Ready: WaitingForTopics), its run spec, co-partitioning of its stream inputs
  and the Tables it writes, and its objects. Bad input is a value here, never an exception: a
  ValueError of a builder is a Stalled InvalidSpec with its message.
- Apply the objects (`k8s.applying`), only when all of that holds; otherwise whatever runs
  keeps running (a Topic briefly not Ready stops nothing).
- Observe the driver pod and the executor pods, and write the status. The scaling figures
  (executors desired and cap, inputs, lag) are the scaling loop's: a reconcile keeps them as
  they are, so the two never undo each other's work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

import pydantic

from rillet.api.v1alpha1 import apps, objects, tables, topics
from rillet.driverapi import reports, runspecs
from rillet.handlers import appaccess, indexes
from rillet.k8s import applying
from rillet.reconcile import (
    appobjects,
    appobservations,
    appstatus,
    kafkaaccess,
    naming,
    runresolving,
    statuses,
)
from rillet.settings import AppSettings, KafkaSettings

# Where an App stands because of its spec and references (not its driver): the scaling loop
# reconciles such an App again, since no event of its own would.
SPEC_REASONS: Final = frozenset(
    {
        appstatus.INVALID_SPEC,
        appstatus.WAITING_FOR_TOPICS,
        appstatus.TOPICS_NOT_CO_PARTITIONED,
        appstatus.KAFKA_UNAVAILABLE,
        appstatus.KAFKA_ACCESS_NOT_GRANTED,
    }
)


@dataclass(frozen=True)
class AppDeps:
    """What an App's reconcile uses besides the App: the cluster, the indexes, the settings."""

    kube: applying.AppKube
    views: indexes.AppViews
    env: appobjects.AppEnvironment
    access: appaccess.AppAccess | None = None  # per-App Kafka principals, when on


def kafka_login(settings: AppSettings, kafka: KafkaSettings) -> runspecs.KafkaLogin | None:
    """How App drivers log in to Kafka: as the App's own principal when those are on.

    Raises ValueError when they are on but the operator does not log in with SASL/SCRAM: its
    admin rights create the Apps' SCRAM users, on the listener the Apps use too.
    """
    if not settings.kafka_principals:
        return None
    protocol, mechanism = kafka.security_protocol, kafka.sasl_mechanism
    if protocol not in ("SASL_SSL", "SASL_PLAINTEXT") or mechanism not in (
        "SCRAM-SHA-256",
        "SCRAM-SHA-512",
    ):
        raise ValueError(
            "per-App Kafka principals (RILLET_APP_KAFKA_PRINCIPALS) need the operator to log in "
            "with SASL/SCRAM: set kafka.securityProtocol to SASL_SSL and kafka.saslMechanism to "
            f"SCRAM-SHA-512 (now {protocol}, {mechanism or 'no mechanism'})"
        )
    return runspecs.KafkaLogin.model_validate(
        {
            "security_protocol": protocol,
            "sasl_mechanism": mechanism,
            "credentials_dir": kafkaaccess.CREDENTIALS_DIR,
            "ca": kafka.ssl_ca_location is not None,
        }
    )


def environment(
    settings: AppSettings, kafka: KafkaSettings, *, apiserver_url: str
) -> appobjects.AppEnvironment:
    """The environment every App's objects are built for."""
    return appobjects.AppEnvironment(
        kafka_bootstrap=settings.kafka_bootstrap or kafka.bootstrap,
        image_pull_policy=settings.image_pull_policy,
        storage_class=settings.storage_class,
        checkpoint_size=settings.checkpoint_size,
        apiserver_url=settings.apiserver_url or apiserver_url,
        kafka_login=kafka_login(settings, kafka),
    )


@dataclass(frozen=True)
class Resolution:
    """What resolving an App concluded; `objects` only when it may run."""

    objects: appobjects.AppObjects | None = None
    spec_problems: tuple[str, ...] = ()
    references: appobservations.ReferenceCheck = field(
        default_factory=appobservations.ReferenceCheck
    )
    copartitioning: tuple[str, ...] = ()
    access_problem: tuple[str, str] | None = None  # (reason, message): see appstatus


def _problem(error: ValueError) -> str:
    """A builder's or the models' error in one line per problem, without pydantic's URLs."""
    if isinstance(error, pydantic.ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
            for e in error.errors(include_input=False, include_url=False)
        )
    return str(error)


def _parse_app(body: Mapping[str, Any]) -> apps.App:
    meta = body["metadata"]
    return apps.App.model_validate(
        {
            "apiVersion": objects.API_VERSION,
            "kind": "App",
            "metadata": {key: meta.get(key) for key in ("name", "namespace", "uid", "generation")},
            "spec": dict(body.get("spec") or {}),
        }
    )


def _topic(body: Mapping[str, Any]) -> topics.Topic:
    """A Topic model whose topicName is its Kafka name (prefixed, when the operator prefixes)."""
    meta, spec = body["metadata"], dict(body.get("spec") or {})
    topic = topics.Topic.model_validate(
        {"metadata": {"name": meta["name"], "namespace": meta["namespace"]}, "spec": spec}
    )
    kafka = indexes.kafka_name("Topic", meta["name"], meta["namespace"], spec)
    return topic.model_copy(update={"spec": topic.spec.model_copy(update={"topic_name": kafka})})


def _table(body: Mapping[str, Any]) -> tables.Table:
    """A Table model whose topicName is its Kafka name (prefixed, when the operator prefixes)."""
    meta, spec = body["metadata"], dict(body.get("spec") or {})
    table = tables.Table.model_validate(
        {"metadata": {"name": meta["name"], "namespace": meta["namespace"]}, "spec": spec}
    )
    kafka = indexes.kafka_name("Table", meta["name"], meta["namespace"], spec)
    return table.model_copy(update={"spec": table.spec.model_copy(update={"topic_name": kafka})})


def _table_partitions(body: Mapping[str, Any]) -> int | None:
    """A Table's partitions: as declared, else as its changelog topic has them."""
    declared = (body.get("spec") or {}).get("partitions")
    return declared or (body.get("status") or {}).get("partitions")


def _referenced(
    body: Mapping[str, Any], views: indexes.AppViews
) -> dict[appobservations.Reference, dict[str, Any]]:
    namespace = str(body["metadata"]["namespace"])
    found: dict[appobservations.Reference, dict[str, Any]] = {}
    for kind, name in appobservations.references(body.get("spec") or {}):
        referenced = (
            views.topic(namespace, name) if kind == "Topic" else views.table(namespace, name)
        )
        if referenced is not None:
            found[(kind, name)] = referenced
    return found


def _run_spec(
    app: apps.App,
    found: Mapping[appobservations.Reference, Mapping[str, Any]],
    env: appobjects.AppEnvironment,
) -> runspecs.RunSpec:
    return runresolving.build_run_spec(
        app,
        topics_by_name={name: _topic(b) for (kind, name), b in found.items() if kind == "Topic"},
        tables_by_name={name: _table(b) for (kind, name), b in found.items() if kind == "Table"},
        bootstrap_servers=env.kafka_bootstrap,
        checkpoint_location=appobjects.checkpoint_location(app),
        namespace=str(app.metadata.namespace),
        kafka_login=env.kafka_login,
    )


def _copartitioning(
    run_spec: runspecs.RunSpec,
    spec: Mapping[str, Any],
    found: Mapping[appobservations.Reference, Mapping[str, Any]],
) -> tuple[str, ...]:
    return appobservations.copartitioning_problems(
        [(i.name, i.partitions) for i in run_spec.stream_inputs],
        [
            (name, _table_partitions(found[("Table", name)]))
            for name in appobservations.written_tables(spec)
        ],
    )


def resolve(
    body: Mapping[str, Any], views: indexes.AppViews, env: appobjects.AppEnvironment
) -> Resolution:
    """Everything about the App decidable without I/O, down to its objects."""
    spec = body.get("spec") or {}
    try:
        app = _parse_app(body)
    except ValueError as error:
        return Resolution(spec_problems=(_problem(error),))
    found = _referenced(body, views)
    check = appobservations.check_references(appobservations.references(spec), found)
    if not check.ok:
        return Resolution(references=check)
    try:
        run_spec = _run_spec(app, found, env)
        problems = _copartitioning(run_spec, spec, found)
        if problems:
            return Resolution(copartitioning=problems)
        known = appobservations.known_parallelism(body.get("status"))
        return Resolution(
            objects=appobjects.build_app_objects(app, run_spec, env, parallelism=known)
        )
    except ValueError as error:  # the models' and builders' way of refusing a spec
        return Resolution(spec_problems=(_problem(error),))


@dataclass(frozen=True)
class Note:
    """An Event to post about the App."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True)
class AppReport:
    """What a reconcile (or a scaling pass) concluded and what to write about it."""

    status_patch: dict[str, Any]
    notes: tuple[Note, ...] = field(default_factory=tuple)


def ready_condition(status: Mapping[str, Any] | None) -> dict[str, Any]:
    """The condition saying where the App last stood (Ready; Stalled for a suspended App, which
    has no Ready), {} when there is none."""
    return statuses.standing_condition((status or {}).get("conditions"))


def standing_notes(
    previous: Mapping[str, Any] | None, standing: appstatus.Standing
) -> tuple[Note, ...]:
    """An Event when the App's standing changes (a stalled one also when its message does).

    A running App's message (executors, lag) changes all the time: that alone is no Event.
    """
    before, verdict = ready_condition(previous), standing.verdict
    stalled = verdict.state == "stalled"
    if before.get("reason") == verdict.reason and (
        not stalled or before.get("message") == verdict.message
    ):
        return ()
    return (Note("Warning" if stalled else "Normal", verdict.reason, verdict.message),)


def applied_notes(name: str, applied: applying.Applied | None) -> tuple[Note, ...]:
    """An Event for what applying the objects did to the driver, if anything."""
    if applied is None:
        return ()
    driver = naming.app_driver_name(name)
    if applied.created:
        message = (
            f"created the driver StatefulSet {driver}, with its ServiceAccount, Role, "
            "RoleBinding, ConfigMap and Service"
        )
        return (Note("Normal", "DriverCreated", message),)
    if applied.replaced:
        message = (
            f"recreated StatefulSet {driver}: its {', '.join(applied.replaced)} cannot change in "
            "place; the checkpoint volume is kept"
        )
        return (Note("Normal", "DriverReplaced", message),)
    if applied.rolled:
        message = "the spec changed: the driver stops at the end of a batch and starts again"
        return (Note("Normal", "DriverRolling", message),)
    return ()


def _carried_inputs(
    previous: Mapping[str, Any], spec: Mapping[str, Any]
) -> tuple[appstatus.InputObservation, ...]:
    """The scaling loop's last view of the inputs, for those still in the spec."""
    names = {str(i.get("name")) for i in spec.get("inputs") or ()}
    return tuple(
        appstatus.InputObservation(
            name=str(i["name"]),
            topic=str(i["topic"]),
            partitions=i.get("partitions"),
            lag=i.get("lag"),
        )
        for i in previous.get("inputs") or ()
        if i.get("name") in names and i.get("topic")
    )


async def _observe_pods(
    kube: applying.AppKube, namespace: str, name: str
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    return await kube.driver_pod(namespace, name), await kube.executor_pods(namespace, name)


def observe(
    body: Mapping[str, Any],
    resolution: Resolution,
    *,
    driver_pod: Mapping[str, Any] | None,
    executor_pods: list[dict[str, Any]],
) -> appstatus.AppObservation:
    """The observation of an App after a reconcile (scaling figures kept from its status)."""
    spec, previous = body.get("spec") or {}, body.get("status") or {}
    progress = reports.read_progress(driver_pod)
    executors = previous.get("executors") or {}
    suspended = bool(spec.get("suspend"))
    return appstatus.AppObservation(
        generation=body["metadata"].get("generation"),
        suspend=suspended,
        spec_problems=resolution.spec_problems,
        missing_references=resolution.references.missing,
        unready_references=resolution.references.unready,
        copartitioning_problems=resolution.copartitioning,
        access_problem=resolution.access_problem,
        driver=appobservations.driver_observation(driver_pod) if driver_pod else None,
        executors_desired=None if suspended else executors.get("desired"),
        executors_ready=appobservations.count_running_executors(executor_pods),
        executors_unschedulable=appobservations.unschedulable_executors(executor_pods),
        executors_cap=None if suspended else executors.get("cap"),
        executors_cap_by=None if suspended else executors.get("capBy"),
        executors_registered=progress.executors,
        state_partitions=previous.get("statePartitions"),
        inputs=() if suspended else _carried_inputs(previous, spec),
        last_batch_time=progress.last_batch_time,
        rows_per_second=progress.rows_per_second,
    )


async def reconcile(body: Mapping[str, Any], deps: AppDeps) -> AppReport:
    """Reconcile one App end to end and report.

    Raises what the apiserver answers besides a refusal (unreachable, 5xx, a conflict): the
    caller retries.
    """
    meta = body["metadata"]
    namespace, name = str(meta["namespace"]), str(meta["name"])
    resolution = resolve(body, deps.views, deps.env)
    applied = None
    granted: tuple[Note, ...] = ()
    access = resolution.objects.kafka_access if resolution.objects is not None else None
    if access is not None and deps.access is not None:
        # Before the objects: a new driver never starts without the ACLs of its spec.
        provisioned = await deps.access.provision(access, deps.kube)
        if provisioned.problem is not None:
            resolution = Resolution(access_problem=provisioned.problem)
        elif provisioned.changes:
            message = f"Kafka principal {kafkaaccess.principal(access.user)}: "
            granted = (
                Note("Normal", "KafkaAccessGranted", message + "; ".join(provisioned.changes)),
            )
    if resolution.objects is not None:
        try:
            applied = await deps.kube.apply(resolution.objects)
        except applying.ApplyRefusedError as error:
            resolution = Resolution(spec_problems=(str(error),))
    driver_pod: dict[str, Any] | None = None
    executor_pods: list[dict[str, Any]] = []
    if resolution.objects is not None:
        driver_pod, executor_pods = await _observe_pods(deps.kube, namespace, name)
    observation = observe(body, resolution, driver_pod=driver_pod, executor_pods=executor_pods)
    previous = body.get("status") or {}
    status = appstatus.app_status(observation, previous=previous, now=datetime.now(UTC))
    notes = (
        granted
        + applied_notes(name, applied)
        + standing_notes(previous, appstatus.derive_standing(observation))
    )
    return AppReport(statuses.merge_patch(previous, status), notes)
