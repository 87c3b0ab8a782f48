"""Apps' own Kafka principals as the tests check them on a secured broker of their own: the
operator's settings for it, a user's ACLs and whether a login works, an App's Secret and password,
this cluster's id in user names, and the Events the operator gives their reasons.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from rillet_devstack.kafka import KafkaCluster

from .kubeapi import Kube


def settings(cluster: KafkaCluster) -> dict[str, str]:
    security = cluster.security
    assert security is not None
    return {**security.operator_environment(), "RILLET_KAFKA_BOOTSTRAP": cluster.bootstrap}


def acls(admin: AdminClient, user: str) -> set[tuple[str, str, str, str]]:
    query = AclBindingFilter(
        ResourceType.ANY,
        None,  # type: ignore[arg-type]
        ResourcePatternType.ANY,
        f"User:{user}",
        None,  # type: ignore[arg-type]
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    return {
        (b.restype.name, b.name, b.resource_pattern_type.name, b.operation.name)
        for b in admin.describe_acls(query).result(timeout=30)
    }


def secret(kube: Kube, namespace: str, app: str) -> dict[str, Any]:
    return json.loads(  # type: ignore[no-any-return]
        kube.kubectl("get", "secret", f"{app}-kafka", "-n", namespace, "-o", "json").stdout
    )


def password(kube: Kube, namespace: str, app: str) -> str:
    return base64.b64decode(secret(kube, namespace, app)["data"]["password"]).decode()


def cluster_id(kube: Kube) -> str:
    """This Kubernetes cluster's id in user names: the start of kube-system's uid."""
    uid = kube.kubectl("get", "namespace", "kube-system", "-o", "jsonpath={.metadata.uid}")
    return uid.stdout.strip().replace("-", "")[:8]


def events(kube: Kube, namespace: str, reason: str) -> list[dict[str, Any]]:
    listed = kube.kubectl(
        "get", "events", "-n", namespace, f"--field-selector=reason={reason}", "-o", "json"
    )
    return list(json.loads(listed.stdout)["items"])


def logs_in(cluster: KafkaCluster, user: str, password: str) -> bool:
    """Whether Kafka takes the login (False only when it says the authentication failed)."""
    security = cluster.security
    assert security is not None
    refusals: list[KafkaError] = []
    config: dict[str, Any] = {
        "bootstrap.servers": cluster.bootstrap,
        **security.client_config(user=user, password=password),
        "error_cb": refusals.append,
    }
    client = AdminClient(config)
    try:
        client.list_topics(timeout=15)
    except KafkaException:
        client.poll(0)  # serves error_cb
        if any(e.code() == KafkaError._AUTHENTICATION for e in refusals):
            return False
        raise
    return True
