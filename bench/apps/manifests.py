"""The Topics the benchmarks apply (their App: rillet_devstack.installs.copying_app, shared
with the tests on the node)."""

from __future__ import annotations

from typing import Any

from rillet.api.v1alpha1 import objects


def topic_manifest(name: str, namespace: str, partitions: int) -> dict[str, Any]:
    return {
        "apiVersion": objects.API_VERSION,
        "kind": "Topic",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"partitions": partitions},
    }
