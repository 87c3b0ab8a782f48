"""The Topics and the slow copying App the benchmarks apply."""

from __future__ import annotations

from typing import Any

from bench.apps import settings
from rillet.api.v1alpha1 import objects


def topic_manifest(name: str, namespace: str, partitions: int) -> dict[str, Any]:
    return {
        "apiVersion": objects.API_VERSION,
        "kind": "Topic",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"partitions": partitions},
    }


def slow_copy(sleep_ms: int) -> str:
    """Records copied as they are, `sleep_ms` per record (Java's Thread.sleep through reflect;
    the pause is part of the value so that Spark cannot prune it away)."""
    return (
        "SELECT concat(value, coalesce(nullif(reflect('java.lang.Thread', 'sleep', "
        f"CAST({sleep_ms} AS BIGINT)), 'null'), '')) AS value FROM lines"
    )


def copying_app(
    name: str,
    namespace: str,
    image: str,
    *,
    source: str,
    target: str,
    sleep_ms: int,
    scaling_spec: dict[str, Any],
    executor_cpu: str = f"{settings.EXECUTOR_CPU_MILLIS}m",
    driver: dict[str, str] = settings.DRIVER,
) -> dict[str, Any]:
    return {
        "apiVersion": objects.API_VERSION,
        "kind": "App",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "image": image,
            "inputs": [
                {
                    "name": "lines",
                    "topicRef": {"name": source},
                    "format": "string",
                    "startingOffsets": "earliest",
                }
            ],
            "pipeline": {"sql": slow_copy(sleep_ms)},
            "outputs": [{"topicRef": {"name": target}}],
            "driver": dict(driver),
            "executor": {"cpu": executor_cpu, "memory": settings.EXECUTOR_MEMORY},
            "scaling": scaling_spec,
            "trigger": {"processingTime": "2s"},
        },
    }
