"""An App's Kafka principal as the reconcile provisions it: its user, its grants, its Secret.

The Secret is built without data: its password is made once, by the reconcile that creates it
(`handlers.appaccess`), and never rebuilt, so applying the App's objects again never changes it.
A new token on the App's annotation `rillet.io/rotate-credentials` asks for a new password
(`rotation`); the driver pod template carries the token (`rotation_annotations`), so the
driver restarts with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rillet.reconcile import kafkaaccess
from rillet.reconcile.appobjects import contexts, metadata


@dataclass(frozen=True)
class KafkaAccess:
    """The principal of one App: SCRAM user, ACLs, and the Secret that holds its password."""

    app: str  # the App's name
    user: str  # the name for a new principal; an existing Secret's username wins
    grants: frozenset[kafkaaccess.Grant]
    secret: dict[str, Any]
    rotation: str | None = None  # the App's rotate-credentials token, if it has one

    @property
    def namespace(self) -> str:
        return str(self.secret["metadata"]["namespace"])

    @property
    def secret_name(self) -> str:
        return str(self.secret["metadata"]["name"])


def build_kafka_access(context: contexts.AppContext) -> KafkaAccess | None:
    """The App's principal when Apps log in as their own (env.kafka_login), else None."""
    if context.env.kafka_login is None:
        return None
    if not context.env.kafka_cluster:
        raise ValueError("per-App Kafka principals need the cluster id (env.kafka_cluster)")
    name = kafkaaccess.secret_name(context.name)
    secret = {
        **metadata.header(context, api_version="v1", kind="Secret", name=name),
        "type": "Opaque",
    }
    return KafkaAccess(
        app=context.name,
        user=kafkaaccess.principal_name(
            cluster=context.env.kafka_cluster, namespace=context.namespace, app=context.name
        ),
        grants=kafkaaccess.grants(context.app, context.run_spec),
        secret=secret,
        rotation=_rotation(context),
    )


def _rotation(context: contexts.AppContext) -> str | None:
    annotations = context.app.metadata.annotations or {}
    return annotations.get(kafkaaccess.ROTATE_ANNOTATION) or None


def rotation_annotations(context: contexts.AppContext) -> dict[str, str]:
    """The driver pod template's record of the rotation token: a new token rolls the driver,
    which then logs in with the new password (provisioned before the template is applied)."""
    rotation = _rotation(context) if context.env.kafka_login is not None else None
    return {kafkaaccess.ROTATED_ANNOTATION: rotation} if rotation else {}
