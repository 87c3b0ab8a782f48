"""The NetworkPolicy of an App's pods: only the App's own pods reach them, and monitoring scrapes.

Spark's ports (the driver's RPC and block manager, each executor's block manager) are for the
App's pods alone: its traffic is authenticated and encrypted (`sparkauth`), and with a CNI that
enforces NetworkPolicy, pods of other Apps and other namespaces cannot even open a connection.
The driver's metrics port is open to the namespaces a platform team picks for monitoring
(`AppEnvironment.monitoring_namespace_labels`, none when empty). Ingress only: drivers reach the
apiserver, Kafka, the object store and the registry, wherever those run. Kubelet probes come
from the node, which CNIs admit regardless.
"""

from __future__ import annotations

from typing import Any

from rillet.driverapi import wiring
from rillet.reconcile import naming
from rillet.reconcile.appobjects import contexts, metadata


def build_network_policy(context: contexts.AppContext) -> dict[str, Any]:
    """The App's NetworkPolicy (see the module docstring)."""
    app_pods = {"matchLabels": {metadata.APP_LABEL: context.name}}  # driver and executors
    own_pods = {"podSelector": app_pods}
    ingress: list[dict[str, Any]] = [{"from": [own_pods]}]
    if context.env.monitoring_namespace_labels:
        labels = dict(context.env.monitoring_namespace_labels)
        ingress.append(
            {
                "from": [{"namespaceSelector": {"matchLabels": labels}}],
                "ports": [{"port": wiring.METRICS_PORT, "protocol": "TCP"}],
            }
        )
    name = naming.app_network_policy_name(context.name)
    return {
        **metadata.header(
            context, api_version="networking.k8s.io/v1", kind="NetworkPolicy", name=name
        ),
        "spec": {
            "podSelector": app_pods,
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }
