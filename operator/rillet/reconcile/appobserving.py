"""Pure: the observation of an App after a reconcile, from what resolving it concluded and
its pods, and the report (status patch, Events) that follows from it.

The scaling figures (executors desired and cap, inputs, lag) are the scaling loop's
(`apptargets`): a reconcile keeps them as its status last had them, for inputs still in the
spec, so the two never undo each other's work.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from rillet.driverapi import reports
from rillet.reconcile import appnotes, appobservations, appresolving, appstatus, notes, statuses


def _carried_inputs(
    previous: Mapping[str, Any], spec: Mapping[str, Any]
) -> tuple[appobservations.InputObservation, ...]:
    """The scaling loop's last view of the inputs, for those still in the spec."""
    names = {str(i.get("name")) for i in spec.get("inputs") or ()}
    return tuple(
        appobservations.InputObservation(
            name=str(i["name"]),
            topic=str(i["topic"]),
            partitions=i.get("partitions"),
            lag=i.get("lag"),
        )
        for i in previous.get("inputs") or ()
        if i.get("name") in names and i.get("topic")
    )


def observe(
    body: Mapping[str, Any],
    resolution: appresolving.Resolution,
    *,
    driver_pod: Mapping[str, Any] | None,
    executor_pods: list[dict[str, Any]],
    lost_nodes: frozenset[str] = frozenset(),
) -> appobservations.AppObservation:
    """The observation of an App after a reconcile (scaling figures kept from its status).
    `lost_nodes`: the nodes not Ready."""
    spec, previous = body.get("spec") or {}, body.get("status") or {}
    progress = reports.read_progress(driver_pod)
    executors = previous.get("executors") or {}
    suspended = bool(spec.get("suspend"))
    return appobservations.AppObservation(
        generation=body["metadata"].get("generation"),
        suspend=suspended,
        spec_problems=resolution.spec_problems,
        missing_references=resolution.references.missing,
        unready_references=resolution.references.unready,
        copartitioning_problems=resolution.copartitioning,
        blocking_problem=resolution.blocking_problem,
        driver=appobservations.driver_observation(driver_pod, lost_nodes=lost_nodes)
        if driver_pod
        else None,
        executors_desired=None if suspended else executors.get("desired"),
        executors_ready=appobservations.count_running_executors(
            executor_pods, lost_nodes=lost_nodes
        ),
        executors_by_node=appobservations.executors_by_node(executor_pods, lost_nodes=lost_nodes),
        executors_lost=appobservations.count_lost_executors(executor_pods, lost_nodes=lost_nodes),
        executors_unschedulable=appobservations.unschedulable_executors(executor_pods),
        executors_cap=None if suspended else executors.get("cap"),
        executors_cap_by=None if suspended else executors.get("capBy"),
        executors_registered=progress.executors,
        state_partitions=previous.get("statePartitions"),
        inputs=() if suspended else _carried_inputs(previous, spec),
        last_batch_time=progress.last_batch_time,
        rows_per_second=progress.rows_per_second,
    )


def derive_report(
    body: Mapping[str, Any],
    resolution: appresolving.Resolution,
    *,
    driver_pod: Mapping[str, Any] | None,
    executor_pods: list[dict[str, Any]],
    lost_nodes: frozenset[str] = frozenset(),
    granted: tuple[notes.Note, ...] = (),
    applied: appnotes.Applied | None = None,
    pod_security: str | None = None,
    at: datetime,
) -> notes.Report:
    """What a reconcile concluded: the App's status patch, and its Events (what provisioning
    its Kafka principal changed, `granted`; what applying did, and a namespace whose
    `pod_security` level is not restricted as a driver starts; a new standing)."""
    observation = observe(
        body,
        resolution,
        driver_pod=driver_pod,
        executor_pods=executor_pods,
        lost_nodes=lost_nodes,
    )
    previous = body.get("status") or {}
    status = appstatus.app_status(observation, previous=previous, now=at)
    name = str(body["metadata"]["name"])
    posted = (
        granted
        + appnotes.applied_notes(name, applied)
        + appnotes.pod_security_notes(str(body["metadata"]["namespace"]), pod_security, applied)
        + appnotes.standing_notes(previous, appstatus.derive_standing(observation))
        + appnotes.lost_executors_note(previous, observation)
    )
    return notes.Report(statuses.merge_patch(previous, status), posted)
