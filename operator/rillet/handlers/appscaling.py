"""The scaling loop: every running App's lag, driver and executors observed, its executors decided.

One operator-wide loop, like the resync, rather than a kopf timer per App: kopf puts a finalizer
on every object with a timer, and an App needs none (its objects go with it by owner
references). Every RILLET_APP_SCALE_SECONDS it takes the latest App bodies from kopf's index
and, for the settled ones (status at the current generation, not being deleted, not suspended):
- observes in one batch: the lag and partitions of every App's stream inputs (one Kafka round
  trip for all Apps, in a worker thread: `kafka.lag`), and every App's driver and executor pods
  (one list request; one per namespace with Apps when the operator holds Roles, not a
  ClusterRole: `applying.app_pods_paths`);
- decides each App's executor count (`reconcile.scaling.plan_executors`, with the App's
  recommendation history kept here, in memory, by uid), never above the cap the partitions set:
  a topic that grew raises the cap at the next pass;
- writes the status only when it changed, conditional on the resourceVersion it read (a newer
  App is its handler's), with an Event per scaling decision that changes the count and per
  change of standing.

The driver reads `status.executors.desired` as often and asks Spark for that many executors.
Apps that wait for Topics or Tables, or whose spec was refused, are reconciled again instead
(`appreconciling`): nothing about such an App changes when what it waits for appears.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from rillet.api.v1alpha1 import appresources
from rillet.driverapi import reports
from rillet.handlers import appreconciling, indexes
from rillet.handlers.resyncing import is_due
from rillet.k8s import applying
from rillet.k8s.writing import ObjectWriter
from rillet.kafka.lag import LagReader, TopicLag
from rillet.reconcile import appobservations, appstatus, naming, scaling, statuses
from rillet.reconcile.appobjects import metadata

log = logging.getLogger(__name__)

PLURAL: Final = "apps"
# An App whose spec was refused is tried again this rarely (a fix elsewhere, say a Table's
# valueSchema, may make it valid; trying every pass would only repeat the refusal).
REFUSED_RETRY_SECONDS: Final = 30.0

PodKey = tuple[str, str, str]  # namespace, app, role


def standing_reason(body: Mapping[str, Any]) -> str | None:
    """The reason of the App's Ready condition, as last written."""
    return appreconciling.ready_condition(body.get("status")).get("reason")


def is_scalable(body: Mapping[str, Any]) -> bool:
    """Settled, not suspended, and not held back by its spec or references."""
    suspended = bool((body.get("spec") or {}).get("suspend"))
    return (
        is_due(body) and not suspended and standing_reason(body) not in appreconciling.SPEC_REASONS
    )


def needs_reconcile(body: Mapping[str, Any]) -> bool:
    """Settled but held back by its spec or references: a reconcile may now get further."""
    return is_due(body) and standing_reason(body) in appreconciling.SPEC_REASONS


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


def target_of(body: Mapping[str, Any], views: indexes.AppViews) -> Target:
    """The App with the Kafka topics of its stream inputs (from the Topics index)."""
    meta, spec = body["metadata"], body.get("spec") or {}
    namespace, name = str(meta["namespace"]), str(meta["name"])
    kafka_names: dict[str, str] = {}
    declared: dict[str, int | None] = {}
    for kind, ref in appobservations.references(spec):
        topic = views.topic(namespace, ref) if kind == "Topic" else None
        if topic is not None:
            topic_spec = topic.get("spec") or {}
            kafka_names[ref] = indexes.kafka_name("Topic", ref, namespace, topic_spec)
            declared[ref] = topic_spec.get("partitions")
    return Target(
        body=body,
        group=naming.consumer_group(namespace=namespace, app=name),
        inputs=appobservations.stream_inputs(spec, kafka_names, declared),
    )


def policy_of(spec: Mapping[str, Any]) -> scaling.ScalingPolicy:
    """The App's scaling policy (spec.scaling as the apiserver defaulted it)."""
    return scaling.policy_for(appresources.Scaling.model_validate(spec.get("scaling") or {}))


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


def scale_note(
    before: int | None, decision: scaling.ScalingDecision
) -> tuple[appreconciling.Note, ...]:
    """An Event when the decision changes the executor count."""
    if before == decision.desired:
        return ()
    change = f"{before} to {decision.desired}" if before is not None else f"{decision.desired}"
    return (
        appreconciling.Note("Normal", "ExecutorsScaled", f"executors {change}: {decision.message}"),
    )


def observe_inputs(
    target: Target, lags: Mapping[tuple[str, str], TopicLag]
) -> tuple[appstatus.InputObservation, ...]:
    """The App's stream inputs with their partitions and lag (unknown where Kafka said none)."""
    unknown = TopicLag(partitions=None, lag=None)
    found = [(i, lags.get((target.group, i.topic), unknown)) for i in target.inputs]
    return tuple(
        appstatus.InputObservation(name=i.name, topic=i.topic, partitions=o.partitions, lag=o.lag)
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
    inputs: tuple[appstatus.InputObservation, ...],
    driver: Mapping[str, Any] | None,
) -> scaling.Parallelism:
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
    return scaling.Parallelism(input_partitions=partitions, state_partitions=state)


def observe(
    target: Target,
    inputs: tuple[appstatus.InputObservation, ...],
    decision: scaling.ScalingDecision,
    pods: Mapping[PodKey, list[Mapping[str, Any]]],
    parallelism: scaling.Parallelism | None = None,
) -> appstatus.AppObservation:
    """What the scaling pass saw of one App, and what it decided."""
    namespace, name = target.key
    driver = driver_pod(target, pods)
    executors = pods.get((namespace, name, "executor"), [])
    progress = reports.read_progress(driver)
    return appstatus.AppObservation(
        generation=target.body["metadata"].get("generation"),
        driver=appobservations.driver_observation(driver) if driver else None,
        executors_desired=decision.desired,
        executors_ready=appobservations.count_running_executors(executors),
        executors_unschedulable=appobservations.unschedulable_executors(executors),
        executors_cap=decision.cap,
        executors_cap_by=decision.cap_by,
        executors_registered=progress.executors,
        state_partitions=parallelism.state_partitions if parallelism else None,
        inputs=inputs,
        last_batch_time=progress.last_batch_time,
        rows_per_second=progress.rows_per_second,
    )


def _key(body: Mapping[str, Any]) -> tuple[str, str]:
    return str(body["metadata"]["namespace"]), str(body["metadata"]["name"])


class AppScaler:
    """Runs the scaling passes and keeps each App's recommendation history."""

    def __init__(
        self,
        *,
        deps: appreconciling.AppDeps,
        lag: LagReader,
        writer: ObjectWriter,
        clock: Any = time.monotonic,
    ) -> None:
        self._deps, self._lag, self._writer, self._clock = deps, lag, writer, clock
        self._history: dict[str, tuple[scaling.Recommendation, ...]] = {}
        self._refused_at: dict[str, float] = {}

    async def run_forever(self, interval: float) -> None:
        """A pass every `interval` seconds (after the previous one ends); until cancelled."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.run_once()
            except Exception:  # a bug here must not end the loop: the next pass tries again
                log.exception("an App scaling pass failed")

    async def run_once(self) -> None:
        """One pass over every App."""
        bodies = self._deps.views.apps()
        scalable = [body for body in bodies if is_scalable(body)]
        self._forget({str(body["metadata"]["uid"]) for body in scalable})
        jobs = [
            self._reconcile(body) for body in bodies if needs_reconcile(body) and self._due(body)
        ]
        results = await asyncio.gather(*jobs, self._scale(scalable), return_exceptions=True)
        for failure in (r for r in results if isinstance(r, BaseException)):
            log.warning("App scaling pass: %s", applying.describe(failure))

    def _forget(self, uids: set[str]) -> None:
        """Drop the history of Apps gone or stopped: a resumed App starts afresh."""
        for uid in self._history.keys() - uids:
            del self._history[uid]

    def _due(self, body: Mapping[str, Any]) -> bool:
        if standing_reason(body) != appstatus.INVALID_SPEC:
            return True
        uid, now = str(body["metadata"]["uid"]), self._clock()
        if now - self._refused_at.get(uid, float("-inf")) < REFUSED_RETRY_SECONDS:
            return False
        self._refused_at[uid] = now
        return True

    async def _reconcile(self, body: Mapping[str, Any]) -> None:
        report = await appreconciling.reconcile(body, self._deps)
        await self._write(body, report)

    async def _scale(self, bodies: Sequence[Mapping[str, Any]]) -> None:
        if not bodies:
            return
        targets = [target_of(body, self._deps.views) for body in bodies]
        lags, pods = await asyncio.gather(
            self._observe_lag(targets),
            self._deps.kube.app_pods({t.key[0] for t in targets}),
            return_exceptions=True,
        )
        if isinstance(pods, BaseException):
            log.warning("listing App pods failed: %s", applying.describe(pods))
            return  # without the pods, the status would say the drivers are gone
        lag_of = lags if isinstance(lags, dict) else {}
        grouped = group_pods(pods)
        results = await asyncio.gather(
            *(self._scale_one(t, lag_of, grouped) for t in targets), return_exceptions=True
        )
        for target, result in zip(targets, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("scaling App %s/%s failed: %s", *target.key, applying.describe(result))

    async def _observe_lag(self, targets: Sequence[Target]) -> dict[tuple[str, str], TopicLag]:
        try:
            return await self._lag.observe(
                {t.group: [i.topic for i in t.inputs] for t in targets},
                from_start={(t.group, i.topic) for t in targets for i in t.inputs if i.from_start},
            )
        except Exception as error:  # Kafka down: lag and partitions unknown, the count holds
            log.warning("reading lag failed: %s", error)
            return {}

    async def _scale_one(
        self,
        target: Target,
        lags: Mapping[tuple[str, str], TopicLag],
        pods: Mapping[PodKey, list[Mapping[str, Any]]],
    ) -> None:
        body = target.body
        uid, previous = str(body["metadata"]["uid"]), body.get("status") or {}
        inputs = observe_inputs(target, lags)
        before = (previous.get("executors") or {}).get("desired")
        parallelism = parallelism_of(target, inputs, driver_pod(target, pods))
        decision = scaling.plan_executors(
            policy_of(body.get("spec") or {}),
            partitions=parallelism,
            lag=appstatus.total_lag(inputs),
            history=self._history.get(uid, ()),
            current=before,
            now=self._clock(),
        )
        self._history[uid] = decision.history
        observation = observe(target, inputs, decision, pods, parallelism)
        status = appstatus.app_status(observation, previous=previous, now=datetime.now(UTC))
        notes = scale_note(before, decision) + appreconciling.standing_notes(
            previous, appstatus.derive_standing(observation)
        )
        patch = statuses.merge_patch(previous, status)
        await self._write(body, appreconciling.AppReport(patch, notes))

    async def _write(self, body: Mapping[str, Any], report: appreconciling.AppReport) -> None:
        meta = body["metadata"]
        if report.status_patch:
            written = await self._writer.patch_status(
                PLURAL,
                meta["namespace"],
                meta["name"],
                report.status_patch,
                resource_version=meta.get("resourceVersion"),
            )
            if not written:  # the App changed since this pass read it: the next pass sees it
                log.debug("App %s/%s changed meanwhile: status not written", *_key(body))
                return
        for note in report.notes:
            await self._writer.post_event(
                dict(body), type_=note.type, reason=note.reason, message=note.message
            )
