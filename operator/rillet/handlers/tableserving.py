"""Table servers: the Deployment, Service and NetworkPolicy of each Table with `spec.serve`.

Applied when a Table is created, resumed or its spec changes, once the Table is Ready: a server
runs only for a Table that owns its topic, so a Table aimed at a topic another object claims
gets none, and a served one that does not own its topic has its objects removed
(`tableservers.serving_decision`). Removed when `spec.serve` is removed (deleting the Table
deletes them through their owner reference). `status.server`, where
lookups go, is part of the Table's status (handlers.tables), written with the rest of it. The
Table's own conditions stay about its topic: the server's health is its Deployment's, which
`kubectl rollout status` and GitOps tools read as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf
import pydantic

from rillet.api.v1alpha1 import tables
from rillet.handlers import indexes
from rillet.handlers import tables as table_handlers
from rillet.handlers.appreconciling import AppDeps
from rillet.handlers.tables import KIND, RESOURCE
from rillet.k8s import applying
from rillet.reconcile import subjects, tableservers
from rillet.settings import TableServerSettings

REFUSED = "ServerRefused"
NO_REGISTRY = "NoSchemaRegistry"
KEPT = "ServerObjectKept"
WITHHELD = "ServerWithheld"
SETTINGS = TableServerSettings()
MAX_WAIT_RETRY_DELAY = 30.0


def _paths(namespace: str, name: str) -> list[str]:
    server = tableservers.server_name(name)
    return [
        applying.object_path(api_version, kind, namespace, server)
        for api_version, kind in (
            ("networking.k8s.io/v1", "NetworkPolicy"),
            ("v1", "Service"),
            ("apps/v1", "Deployment"),
        )
    ]


@kopf.on.resume(*RESOURCE)
@kopf.on.create(*RESOURCE)
@kopf.on.update(*RESOURCE, field="spec")
async def serve_table(
    body: kopf.Body,
    memo: kopf.Memo,
    retry: int,
    old: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    metadata = body["metadata"]
    name, namespace = str(metadata["name"]), str(metadata["namespace"])
    try:
        spec = tables.TableSpec.model_validate(dict(body.get("spec") or {}), strict=False)
    except pydantic.ValidationError:
        return  # the Table's reconcile reports an invalid spec
    kube: applying.AppKube = memo.apps.kube
    if spec.serve is None:
        # Only where there was a server: the old spec had serve (an update, whose `old` is the
        # spec), or the status still names one (serve removed while the operator was away).
        had_server = bool((old or {}).get("serve")) or bool(
            (body.get("status") or {}).get("server")
        )
        if had_server:
            await _delete_server(body, kube, _paths(namespace, name))
        return
    subject = table_handlers.subject_for(body, indexes.Views.of(kwargs))
    decision = tableservers.serving_decision(
        refusal=tableservers.ownership_refusal(subjects.gate(subject)),
        conditions=list((body.get("status") or {}).get("conditions") or []),
    )
    if decision.action == "withhold":
        await _delete_server(body, kube, _paths(namespace, name))
        message = f"no server for a Table that does not own its topic: {decision.reason}"
        kopf.event(body, type="Warning", reason=WITHHELD, message=message)
        return
    if decision.action == "wait":
        # The Table's reconcile writes Ready; kopf calls this again after the delay.
        raise kopf.TemporaryError(decision.reason, delay=min(2.0**retry, MAX_WAIT_RETRY_DELAY))
    served = tableservers.ServedTable(
        name=name,
        namespace=namespace,
        uid=str(metadata["uid"]),
        topic=indexes.kafka_name(
            KIND, name, namespace, body.get("spec") or {}, body.get("status") or {}
        ),
        key_format=spec.key_format,
        value_format=spec.value_format,
        serving=spec.serve,
    )
    env = tableservers.ServerEnvironment(
        image=SETTINGS.image,
        image_pull_policy=SETTINGS.image_pull_policy,
        kafka_bootstrap=memo.apps.env.kafka_bootstrap,
        schema_registry=memo.apps.env.schema_registry,
        operator_namespace=SETTINGS.own_namespace(),
        operator_labels=tuple(sorted(SETTINGS.operator_labels.items())),
        monitoring_namespace_labels=tuple(sorted(SETTINGS.monitoring_namespace_labels.items())),
        apiserver_cidrs=tuple(SETTINGS.apiserver_cidrs),
    )
    if (problem := tableservers.registry_problem(served, env)) is not None:
        kopf.event(body, type="Warning", reason=NO_REGISTRY, message=problem)
        raise kopf.PermanentError(problem)
    built = tableservers.server_objects(served, env)
    try:
        await _write_registry_secret(body, served, env, memo.apps)
        await kube.apply_all(built)
        if not spec.serve.network_policy:
            await _delete_server(body, kube, _paths(namespace, name)[:1])
    except applying.ApplyRefusedError as error:
        message = f"{error}; fix spec.serve, or remove it to stop serving"
        kopf.event(body, type="Warning", reason=REFUSED, message=message)
        raise kopf.PermanentError(message) from None


async def _delete_server(body: kopf.Body, kube: applying.AppKube, paths: list[str]) -> None:
    """Delete the Table server's objects at `paths`, only those the Table controls (a Table
    withheld from serving may never have had a server, and the names may be another's)."""
    metadata = body["metadata"]
    owner = tableservers.owner_reference(str(metadata["name"]), str(metadata["uid"]))
    left = await kube.delete_owned(paths, owner)
    if left:
        message = f"{', '.join(left)} kept: Rillet did not make it for this Table"
        kopf.event(body, type="Warning", reason=KEPT, message=message)


async def _write_registry_secret(
    body: kopf.Body,
    served: tableservers.ServedTable,
    env: tableservers.ServerEnvironment,
    deps: AppDeps,
) -> None:
    """The registry's credentials for an avro or protobuf Table's server, in the Table's
    namespace (pods mount only Secrets of their own), before the Deployment that mounts them."""
    secret = tableservers.registry_secret(served, env)
    if secret is None or deps.registry is None:
        return
    problem = await deps.registry.write(
        secret,
        deps.kube,
        keys=(tableservers.TABLE_LABEL, tableservers.MANAGED_BY_LABEL),
        made_for=f"the server of Table {served.name}",
    )
    if problem is not None:
        kopf.event(body, type="Warning", reason=REFUSED, message=problem)
        raise kopf.PermanentError(problem)
