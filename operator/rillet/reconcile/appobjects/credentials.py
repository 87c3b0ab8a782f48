"""An App's Kafka principal as the reconcile provisions it: its user, its grants, its Secret.

The Secret is built without data: its password is made once, by the reconcile that creates it
(`handlers.appaccess`), and never rebuilt, so applying the App's objects again never changes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rillet.reconcile import kafkaaccess
from rillet.reconcile.appobjects import contexts, metadata


@dataclass(frozen=True)
class KafkaAccess:
    """The principal of one App: SCRAM user, ACLs, and the Secret that holds its password."""

    user: str
    grants: frozenset[kafkaaccess.Grant]
    secret: dict[str, Any]

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
    name = kafkaaccess.secret_name(context.name)
    secret = {
        **metadata.header(context, api_version="v1", kind="Secret", name=name),
        "type": "Opaque",
    }
    return KafkaAccess(
        user=kafkaaccess.principal_name(namespace=context.namespace, app=context.name),
        grants=kafkaaccess.grants(context.app, context.run_spec),
        secret=secret,
    )
