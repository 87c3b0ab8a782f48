"""Served Tables on the node: `rillet table get` as a user runs it, and the server's readiness."""

from __future__ import annotations

import os
import subprocess
import sys

from .conftest import Kube

CLI = (sys.executable, "-m", "rillet.cli")


def server_settings(operator_image: str) -> dict[str, str]:
    """An operator's settings that run Table servers on the node with the stack's image."""
    return {
        "RILLET_TABLE_SERVER_IMAGE": operator_image,
        "RILLET_TABLE_SERVER_IMAGE_PULL_POLICY": "Never",  # the node has it, no registry
    }


def table_get(
    kube: Kube, name: str, key: str, namespace: str, bootstrap: str | None
) -> subprocess.CompletedProcess[str]:
    """`rillet table get`, given Kafka's bootstrap servers or not (none in its environment)."""
    env = {k: v for k, v in os.environ.items() if k != "RILLET_KAFKA_BOOTSTRAP"}
    kafka = ["-b", bootstrap] if bootstrap else []
    return subprocess.run(
        [*CLI, "table", "get", name, key, "-n", namespace, *kafka],
        capture_output=True,
        text=True,
        env={**env, "KUBECONFIG": str(kube.kubeconfig)},
        timeout=120,
        check=False,
    )


def ready_replicas(kube: Kube, name: str, namespace: str) -> int:
    # The Table's status names its server (handlers.tables) apart from the handler that applies
    # the server's objects (handlers.tableserving): the Deployment may come a moment later.
    deployment = kube.api.read("deployment", name, namespace) or {}
    return int((deployment.get("status") or {}).get("readyReplicas") or 0)
