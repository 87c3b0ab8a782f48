"""Writing status and Events for objects outside a kopf handler (the periodic resync).

Uses the official client in a worker thread; credentials come from the kubeconfig or the
in-cluster ServiceAccount, exactly as kopf's own login does.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from rillet.api.v1alpha1 import objects
from rillet.k8s import login

COMPONENT = "rillet-operator"


class ObjectWriter:
    """Patches the status subresource of Rillet objects and posts core/v1 Events about them.

    `instance` names this replica in its Events (reportingInstance, as Kubernetes' own
    controllers name their pod), so that the Events of two replicas can be told apart.
    """

    def __init__(self, instance: str = COMPONENT) -> None:
        self._instance = instance
        login.load_config()
        self._custom = client.CustomObjectsApi()
        self._core = client.CoreV1Api()

    async def patch_status(
        self,
        plural: str,
        namespace: str,
        name: str,
        patch: dict[str, Any],
        *,
        resource_version: str | None,
    ) -> bool:
        """Merge-patch the status if the object is still at `resource_version`.

        Returns False (and writes nothing) when the object changed or went away meanwhile.
        """
        body: dict[str, Any] = {"status": patch}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        try:
            await asyncio.to_thread(
                self._custom.patch_namespaced_custom_object_status,
                objects.GROUP,
                objects.VERSION,
                namespace,
                plural,
                name,
                body,
            )
        except ApiException as error:
            if error.status in (404, 409):
                return False
            raise
        return True

    async def post_event(
        self, body: dict[str, Any], *, type_: str, reason: str, message: str
    ) -> None:
        metadata = body["metadata"]
        now = datetime.now(UTC)
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(
                name=f"{metadata['name']}.{uuid.uuid4().hex[:16]}", namespace=metadata["namespace"]
            ),
            involved_object=client.V1ObjectReference(
                api_version=body["apiVersion"],
                kind=body["kind"],
                name=metadata["name"],
                namespace=metadata["namespace"],
                uid=metadata["uid"],
            ),
            type=type_,
            reason=reason,
            message=message[:1024],
            first_timestamp=now,
            last_timestamp=now,
            count=1,
            source=client.V1EventSource(component=COMPONENT),
            reporting_component=COMPONENT,
            reporting_instance=self._instance,
        )
        await asyncio.to_thread(self._core.create_namespaced_event, metadata["namespace"], event)
