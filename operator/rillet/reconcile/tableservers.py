"""The Kubernetes objects of a Table's server (pure): a Deployment, a Service, a NetworkPolicy,
and whether the Table gets a server at all (`serving_decision`).

One Deployment per served Table, each replica holding the whole Table: any replica answers any
key, the Service spreads lookups, and a replica that restarts rebuilds its store from the topic
while the others answer. Routing lookups to the replica owning a key's partition would let a
Table outgrow one pod's disk, at the price of a router; a Table that large is better read by an
App (docs/tables.md).

The pods run the operator's image (`rillet table serve`, no Spark) under the restricted Pod
Security Standard, with no ServiceAccount token (the topic and formats come as arguments), a
read-only root filesystem and the store on an emptyDir. They are Ready once caught up with the
topic (`/readyz`), so a rollout or a restart never serves a Table that is still loading.
Every object has the Table as controller owner: deleting the Table deletes them.

A lookup is authorized by RBAC with the caller's own token (`tables.serving.authorizing`): the
pod mounts only the cluster's CA (the ConfigMap kube-root-ca.crt) to reach the apiserver, and
needs no RBAC of its own. Metrics have a port of their own, and the NetworkPolicy (on unless
`serve.networkPolicy: false`) admits lookups from the Table's namespace and the operator, and
scrapes from the monitoring namespaces (docs/security-model.md).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from rillet.api.v1alpha1 import fields, objects, tables
from rillet.driverapi import runspecs
from rillet.reconcile import statuses

PORT: Final = 8080
METRICS_PORT: Final = 9090
KUBE_CA_CONFIGMAP: Final = "kube-root-ca.crt"  # published in every namespace by Kubernetes
KUBE_CA_DIR: Final = "/etc/rillet/kube-ca"
KUBE_CA_VOLUME: Final = "kube-ca"
STORE_DIR: Final = "/var/lib/rillet"
TABLE_LABEL: Final = "rillet.io/table"
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
REGISTRY_DIR: Final = "/etc/rillet/schema-registry"
REGISTRY_VOLUME: Final = "schema-registry-credentials"
RUNTIME_UID: Final = 10001  # the operator image's user (images/operator/Dockerfile)
SERVICE_NAME_MAX: Final = 63  # a Service name is a DNS-1035 label
# Value formats a server decodes with the schema registry's schemas (printed as JSON).
REGISTRY_FORMATS: Final = ("avro", "protobuf")
_SUFFIX: Final = "-server"
_DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True)
class ServerEnvironment:
    """What every Table server is built with, from the operator's settings."""

    image: str
    image_pull_policy: str
    kafka_bootstrap: str
    # The schema registry, for servers of avro and protobuf Tables; credentials_dir set when it has
    # credentials, which the server's Secret (registry_secret) then holds.
    schema_registry: runspecs.SchemaRegistry | None = None
    # Who else the NetworkPolicy admits: the operator's pods (lookups), and pods of the
    # namespaces a namespaceSelector matchLabels picks (metrics); empty: no such rule.
    operator_namespace: str = ""
    operator_labels: tuple[tuple[str, str], ...] = ()
    monitoring_namespace_labels: tuple[tuple[str, str], ...] = ()
    # Where the apiserver's proxy (`rillet table get`) comes from: a CNI that enforces
    # NetworkPolicy sees the apiserver as an address, outside every namespace.
    apiserver_cidrs: tuple[str, ...] = ()


@dataclass(frozen=True)
class ServedTable:
    """The Table a server is built for."""

    name: str
    namespace: str
    uid: str
    topic: str
    key_format: fields.Format
    value_format: fields.Format
    serving: tables.TableServing


def server_name(table: str) -> str:
    """The name of the Table's Deployment, Service and NetworkPolicy: `<table>-server`, or a
    shortened form with a hash when that is no DNS-1035 label (dots, over 63 characters)."""
    plain = f"{table}{_SUFFIX}"
    if len(plain) <= SERVICE_NAME_MAX and _DNS_1035_LABEL.fullmatch(plain):
        return plain
    digest = hashlib.sha256(table.encode()).hexdigest()[:8]
    base = re.sub(r"[^a-z0-9-]", "-", table.lower()).strip("-")
    if not base[:1].isalpha():
        base = f"t-{base}"
    room = SERVICE_NAME_MAX - len(_SUFFIX) - len(digest) - 1
    return f"{base[:room].rstrip('-')}-{digest}{_SUFFIX}"


def labels(table: str) -> dict[str, str]:
    """The labels of every object of the Table's server."""
    return {
        "app.kubernetes.io/name": "rillet-table-server",
        "app.kubernetes.io/instance": table,
        MANAGED_BY_LABEL: "rillet",
        TABLE_LABEL: table,
    }


def server_status(table: str, namespace: str) -> dict[str, str]:
    """status.server of a served Table: its Service, and where pods of the cluster look keys
    up (`<url>/<key>`)."""
    service = server_name(table)
    return {"service": service, "url": f"http://{service}.{namespace}.svc:{PORT}/tables/{table}"}


def decodes_with_registry(served: ServedTable) -> bool:
    """Whether the server decodes the Table's values with the schema registry."""
    return served.value_format in REGISTRY_FORMATS


def registry_problem(served: ServedTable, env: ServerEnvironment) -> str | None:
    """Why the server cannot decode the Table's values, or None."""
    if decodes_with_registry(served) and env.schema_registry is None:
        return (
            f"the Table's values are {served.value_format}, and the operator has no schema "
            f"registry to decode them with: set schemaRegistry.url in the chart's values "
            f"(RILLET_SCHEMA_REGISTRY_URL)"
        )
    return None


def registry_secret_name(table: str) -> str:
    """The Secret of the registry's credentials of the Table's server (`<server>-schema-registry`:
    an App's is `<app>-schema-registry`, so an App and a Table of one name do not meet)."""
    return f"{server_name(table)}-schema-registry"


def registry_secret(served: ServedTable, env: ServerEnvironment) -> dict[str, Any] | None:
    """The server's registry Secret, built without data (the handler adds it the moment it
    applies it, as for an App's: appobjects.registrycredentials); None when it needs none."""
    if not _mounts_credentials(served, env):
        return None
    metadata = {**_metadata(served), "name": registry_secret_name(served.name)}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": "Opaque"}


def _mounts_credentials(served: ServedTable, env: ServerEnvironment) -> bool:
    registry = env.schema_registry
    return decodes_with_registry(served) and registry is not None and bool(registry.credentials_dir)


@dataclass(frozen=True)
class ServingDecision:
    """Whether a served Table gets its server: "serve", "withhold" (none, and any removed)
    or "wait" (none made yet, any kept: the Table is not Ready yet)."""

    action: str
    reason: str = ""


def ownership_refusal(verdict: statuses.Verdict | None) -> str | None:
    """Why a Table does not own its topic, from the verdict reached without Kafka
    (subjects.gate): stalled (another object's claim, a bad name, an invalid spec) or
    unmanaged (the topic is someone else's to manage); None when that verdict allows it."""
    if verdict is None or verdict.state not in ("stalled", "unmanaged"):
        return None
    return f"{verdict.reason}: {verdict.message}"


def serving_decision(
    *, refusal: str | None, conditions: Sequence[Mapping[str, Any]]
) -> ServingDecision:
    """A server only for a Table that owns its topic: `refusal` says why it does not, as far
    as the objects tell (another object's claim, a bad name, unmanaged); a Stalled condition
    says what Kafka told (a topic it may not take); and Ready, that the topic is its own."""
    if refusal is not None:
        return ServingDecision("withhold", refusal)
    by_type = {str(c.get("type")): c for c in conditions}
    stalled = by_type.get("Stalled") or {}
    if stalled.get("status") == "True":
        return ServingDecision("withhold", str(stalled.get("message") or stalled.get("reason")))
    if (by_type.get("Ready") or {}).get("status") == "True":
        return ServingDecision("serve")
    return ServingDecision("wait", "the Table is not Ready yet (its topic is not its own yet)")


def server_objects(served: ServedTable, env: ServerEnvironment) -> list[dict[str, Any]]:
    """The server's objects in apply order (the NetworkPolicy unless turned off)."""
    built = [_deployment(served, env), _service(served)]
    if served.serving.network_policy:
        built.append(_network_policy(served, env))
    return built


def owner_reference(name: str, uid: str) -> dict[str, Any]:
    """The Table as controller of its server's objects: they go with it."""
    return {
        "apiVersion": objects.API_VERSION,
        "kind": "Table",
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(served: ServedTable) -> dict[str, Any]:
    return {
        "name": server_name(served.name),
        "namespace": served.namespace,
        "labels": labels(served.name),
        "ownerReferences": [owner_reference(served.name, served.uid)],
    }


def _selector(served: ServedTable) -> dict[str, str]:
    return {"rillet.io/table": served.name, "app.kubernetes.io/name": "rillet-table-server"}


def _container(served: ServedTable, env: ServerEnvironment) -> dict[str, Any]:
    serving = served.serving
    probe = {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 2}
    return {
        "name": "server",
        "image": env.image,
        "imagePullPolicy": env.image_pull_policy,
        "args": [
            "table",
            "serve",
            served.name,
            f"--topic={served.topic}",
            f"--key-format={served.key_format}",
            f"--value-format={served.value_format}",
            f"--namespace={served.namespace}",
            f"--port={PORT}",
            f"--metrics-port={METRICS_PORT}",
            "--authorization=kubernetes",
            f"--apiserver-ca-file={KUBE_CA_DIR}/ca.crt",
            f"--store-dir={STORE_DIR}/store",
            *(
                [f"--registry-credentials-dir={REGISTRY_DIR}"]
                if _mounts_credentials(served, env)
                else []
            ),
        ],
        "env": [
            {"name": "RILLET_KAFKA_BOOTSTRAP", "value": env.kafka_bootstrap},
            *_registry_env(served, env),
            *_scratch_env(served),
        ],
        "ports": [
            {"name": "http", "containerPort": PORT},
            {"name": "metrics", "containerPort": METRICS_PORT},
        ],
        "readinessProbe": probe,
        # Generous: a store rebuild of a large Table takes a while, and is not a hang.
        "startupProbe": {
            "httpGet": {"path": "/healthz", "port": "http"},
            "periodSeconds": 2,
            "failureThreshold": 30,
        },
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
        "resources": {
            "requests": {"cpu": str(serving.cpu), "memory": str(serving.memory)},
            "limits": {"memory": str(serving.memory)},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
        },
        "volumeMounts": [
            {"name": "store", "mountPath": STORE_DIR},
            {"name": KUBE_CA_VOLUME, "mountPath": KUBE_CA_DIR, "readOnly": True},
            *(
                [{"name": REGISTRY_VOLUME, "mountPath": REGISTRY_DIR, "readOnly": True}]
                if _mounts_credentials(served, env)
                else []
            ),
        ],
    }


def _registry_env(served: ServedTable, env: ServerEnvironment) -> list[dict[str, str]]:
    """Where an avro or protobuf Table's server finds the registry (the credentials are files
    of the mounted Secret, never env values: `--registry-credentials-dir`)."""
    if not decodes_with_registry(served) or env.schema_registry is None:
        return []
    return [{"name": "RILLET_SCHEMA_REGISTRY_URL", "value": env.schema_registry.url}]


def _scratch_env(served: ServedTable) -> list[dict[str, str]]:
    """A protobuf Table's server compiles its schemas' `.proto` text with protoc, in a temporary
    directory: on the store's volume, the root filesystem being read-only."""
    if served.value_format != "protobuf":
        return []
    return [{"name": "TMPDIR", "value": STORE_DIR}]


def _deployment(served: ServedTable, env: ServerEnvironment) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(served),
        "spec": {
            "replicas": served.serving.replicas,
            "selector": {"matchLabels": _selector(served)},
            # A new replica is Ready only once caught up: the old one answers until then.
            "strategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": labels(served.name)},
                "spec": {
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": RUNTIME_UID,
                        "runAsGroup": RUNTIME_UID,
                        "fsGroup": RUNTIME_UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [_container(served, env)],
                    "volumes": [
                        {"name": "store", "emptyDir": {"sizeLimit": str(served.serving.storage)}},
                        # The apiserver's CA only: the pod has no token (automount is off).
                        {"name": KUBE_CA_VOLUME, "configMap": {"name": KUBE_CA_CONFIGMAP}},
                        *_registry_volume(served, env),
                    ],
                },
            },
        },
    }


def _registry_volume(served: ServedTable, env: ServerEnvironment) -> list[dict[str, Any]]:
    if not _mounts_credentials(served, env):
        return []
    secret = {"secretName": registry_secret_name(served.name), "defaultMode": 0o440}
    return [{"name": REGISTRY_VOLUME, "secret": secret}]


def _service(served: ServedTable) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(served),
        "spec": {
            "selector": _selector(served),
            "ports": [
                {"name": "http", "port": PORT, "targetPort": "http"},
                {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics"},
            ],
        },
    }


def _network_policy(served: ServedTable, env: ServerEnvironment) -> dict[str, Any]:
    # Lookups: any pod of the namespace (an empty podSelector), and the operator's pods.
    lookups: list[dict[str, Any]] = [{"podSelector": {}}]
    if env.operator_namespace and env.operator_labels:
        lookups.append(
            {
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": env.operator_namespace}
                },
                "podSelector": {"matchLabels": dict(env.operator_labels)},
            }
        )
    lookups += [{"ipBlock": {"cidr": cidr}} for cidr in env.apiserver_cidrs]
    ingress: list[dict[str, Any]] = [{"from": lookups, "ports": [{"port": PORT}]}]
    if env.monitoring_namespace_labels:
        monitoring = {"namespaceSelector": {"matchLabels": dict(env.monitoring_namespace_labels)}}
        ingress.append({"from": [monitoring], "ports": [{"port": METRICS_PORT}]})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(served),
        "spec": {
            "podSelector": {"matchLabels": _selector(served)},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }
