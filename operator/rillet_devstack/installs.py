"""What the demo, the tests on the node and the benchmarks install on the local stack alike:
the `helm install` values that run the chart's operator from the image the stack built, and
the App manifests sized for the node (one node's two CPUs, shared with the broker)."""

from __future__ import annotations

from typing import Any

# A driver and a few executors fit the node's two CPUs beside the broker and the operator.
NODE_DRIVER = {"cpu": "250m", "memory": "1536Mi"}
NODE_EXECUTOR = {"cpu": "250m", "memory": "1Gi"}


def local_operator_values(*, operator_image: str, kafka_bootstrap: str, watched: str) -> list[str]:
    """`helm install` arguments: the chart's operator on `operator_image` (built on the node,
    never pulled), on the stack's Kafka, watching the namespace `watched`."""
    repository, tag = operator_image.rsplit(":", 1)
    return [
        "--set",
        f"image.repository={repository}",
        "--set-string",  # a content hash of digits alone would otherwise be a number
        f"image.tag={tag}",
        "--set",
        "image.pullPolicy=Never",
        "--set",
        f"kafka.bootstrapServers={kafka_bootstrap}",
        "--set",
        f"watchNamespaces={{{watched}}}",
        # The demo, the tests and the benchmarks produce to and read Kafka topics by the names
        # their objects give, as an install upgraded with its names kept (docs/upgrading.md).
        "--set",
        "operator.prefixNamespace=false",
    ]


def slow_copy_sql(sleep_ms: int) -> str:
    """Records copied as they are, `sleep_ms` per record (Java's Thread.sleep through reflect,
    which returns the string 'null' for a void method; the pause is part of the value so that
    Spark cannot prune it away)."""
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
    scaling: dict[str, Any],
    executor_cpu: str = NODE_EXECUTOR["cpu"],
    driver: dict[str, str] = NODE_DRIVER,
    spark_conf: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An App copying the string records of Topic `source` to Topic `target` through
    `slow_copy_sql`, a batch every 2 s, sized for the node."""
    spec: dict[str, Any] = {
        "image": image,
        "inputs": [
            {
                "name": "lines",
                "topicRef": {"name": source},
                "format": "string",
                "startingOffsets": "earliest",
            }
        ],
        "pipeline": {"sql": slow_copy_sql(sleep_ms)},
        "outputs": [{"topicRef": {"name": target}}],
        "driver": dict(driver),
        "executor": {"cpu": executor_cpu, "memory": NODE_EXECUTOR["memory"]},
        "scaling": scaling,
        "trigger": {"processingTime": "2s"},
    }
    if spark_conf is not None:
        spec["sparkConf"] = spark_conf
    return {
        "apiVersion": "rillet.io/v1alpha1",
        "kind": "App",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
