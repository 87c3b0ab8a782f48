"""The Topics the benchmarks apply (their App: rillet_devstack.installs.copying_app, shared
with the tests on the node)."""

from __future__ import annotations

from typing import Any

from rillet.api.v1alpha1 import objects
from rillet_devstack import installs


def topic_manifest(name: str, namespace: str, partitions: int) -> dict[str, Any]:
    return {
        "apiVersion": objects.API_VERSION,
        "kind": "Topic",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"partitions": partitions},
    }


def copying_pipeline(
    app: str,
    namespace: str,
    image: str,
    *,
    source: str,
    target: str,
    partitions: int,
    **app_options: Any,
) -> list[dict[str, Any]]:
    """A slow copying App (installs.copying_app, with `app_options`) between two new Topics of
    `partitions` partitions each: what the scaling benchmarks apply."""
    return [
        topic_manifest(source, namespace, partitions),
        topic_manifest(target, namespace, partitions),
        installs.copying_app(app, namespace, image, source=source, target=target, **app_options),
    ]
