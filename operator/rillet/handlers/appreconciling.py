"""The one reconcile flow of an App: resolve, check, build, apply, observe, report.

Used by the kopf handlers (create, update, resume) and by the scaling loop for Apps that wait
for their Topics and Tables (nothing about the App changes when a Topic appears, so no handler
would run). A reconcile yields a `notes.Report`: the status merge patch (empty when nothing
changed) and the Events to post, one per change.

This module does the I/O; the decisions are pure, in `rillet.reconcile`:
- Resolve (`appresolving.resolve`, no I/O: kopf's indexes and pure builders): the App model,
  its references, its run spec, co-partitioning and its objects.
- Provision the App's Kafka principal, when those are on (`appaccess`), create the key of
  Spark's traffic once (`appobjects.sparkauth`), write the schema registry's credentials of an
  Avro App (`appregistry`), then apply the objects
  (`k8s.applying`), only when all of that holds; otherwise whatever runs keeps running (a Topic
  briefly not Ready stops nothing).
- Observe the driver pod and the executor pods; the status and the Events follow from them
  (`appobserving.derive_report`, which keeps the scaling loop's figures as they are).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rillet.handlers import appaccess, appregistry, indexes
from rillet.k8s import applying
from rillet.reconcile import (
    appnotes,
    appobjects,
    appobservations,
    appobserving,
    appresolving,
    appstatus,
    notes,
)
from rillet.reconcile.appobjects import sparkauth

log = logging.getLogger(__name__)
_NODE_PROBLEMS_SAID: set[str] = set()


@dataclass(frozen=True)
class AppDeps:
    """What an App's reconcile uses besides the App: the cluster, the indexes, the settings."""

    kube: applying.AppKube
    views: indexes.AppViews
    env: appobjects.AppEnvironment
    access: appaccess.AppAccess | None = None  # per-App Kafka principals, when on
    registry: appregistry.RegistryCredentials | None = None  # when the operator has some


async def _observe_pods(
    kube: applying.AppKube, namespace: str, name: str
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    return await kube.driver_pod(namespace, name), await kube.executor_pods(namespace, name)


async def lost_nodes(kube: applying.AppKube) -> frozenset[str]:
    """The nodes not Ready; none known when the nodes cannot be read (an operator installed
    without the chart's node-reading ClusterRole): the Apps' statuses then say less, no more."""
    try:
        return appobservations.lost_nodes(await kube.nodes())
    except Exception as error:  # a status without node news beats no status
        said = applying.describe(error)
        if said not in _NODE_PROBLEMS_SAID:  # once each: it repeats every pass
            _NODE_PROBLEMS_SAID.add(said)
            log.warning("reading nodes failed, lost nodes go unseen: %s", said)
        return frozenset()


async def _apply(
    resolution: appresolving.Resolution, deps: AppDeps
) -> tuple[appresolving.Resolution, applying.Applied | None]:
    """The App's Spark key and registry Secrets, then its objects, applied; a refusal or a
    registry Secret that is not the operator's as InvalidSpec, another object that is not as
    ObjectNotOwned (nothing applied after either)."""
    objects = resolution.objects
    if objects is None:
        return resolution, None
    try:
        key = secrets.token_bytes(sparkauth.SECRET_BYTES)  # used only if the Secret is new
        await deps.kube.create_once(sparkauth.with_key(objects.spark_auth_secret, key))
        if objects.registry_secret is not None and deps.registry is not None:
            problem = await deps.registry.write(objects.registry_secret, deps.kube)
            if problem is not None:
                return appresolving.Resolution(spec_problems=(problem,)), None
        return resolution, await deps.kube.apply(objects)
    except applying.ForeignObjectError as error:
        return appresolving.Resolution(
            blocking_problem=(appstatus.OBJECT_NOT_OWNED, str(error))
        ), None
    except applying.ApplyRefusedError as error:
        return appresolving.Resolution(spec_problems=(str(error),)), None


async def reconcile(body: Mapping[str, Any], deps: AppDeps) -> notes.Report:
    """Reconcile one App end to end and report.

    Raises what the apiserver answers besides a refusal (unreachable, 5xx, a conflict): the
    caller retries.
    """
    meta = body["metadata"]
    namespace, name = str(meta["namespace"]), str(meta["name"])
    resolution = appresolving.resolve(body, deps.views, deps.env)
    granted: tuple[notes.Note, ...] = ()
    access = resolution.objects.kafka_access if resolution.objects is not None else None
    if access is not None and deps.access is not None:
        # Before the objects: a new driver never starts without the ACLs of its spec.
        provisioned = await deps.access.provision(access, deps.kube)
        if provisioned.problem is not None:
            resolution = appresolving.Resolution(blocking_problem=provisioned.problem)
        else:
            granted = appnotes.granted_notes(provisioned.user, provisioned.changes)
            if provisioned.rotated:
                granted += appnotes.rotated_note(provisioned.user, access.secret_name)
    resolution, applied = await _apply(resolution, deps)
    driver_pod: dict[str, Any] | None = None
    executor_pods: list[dict[str, Any]] = []
    if resolution.objects is not None:
        driver_pod, executor_pods = await _observe_pods(deps.kube, namespace, name)
    lost = await lost_nodes(deps.kube) if driver_pod or executor_pods else frozenset()
    return appobserving.derive_report(
        body,
        resolution,
        driver_pod=driver_pod,
        executor_pods=executor_pods,
        lost_nodes=lost,
        granted=granted,
        applied=applied,
        pod_security=deps.views.pod_security(namespace),
        at=datetime.now(UTC),
    )
