"""Helpers of the runtime's integration tests: manifests with private topics, Kafka I/O, drivers.

Every test runs Apps against the real Kafka of the local stack with topics of its own (under
its `kafka_prefix`, deleted after it): the example manifests are loaded as they are and only
their Kafka topic names (spec.topicName) and partition counts are changed. Apps run either in
this process (`run_app`, sharing one local SparkSession: a memory sink or view a test names
itself gets a unique name) or as a `python -m rillet.cli run` subprocess (`cli_run`, in a
process group of its own that `killed_at_exit` ends as a whole).
Every wait has a deadline.

The manifests are made here; the rest lives by what it drives, and the tests reach all of it
as `rt.<name>` through this module: Kafka I/O in runtime_kafka.py, Apps in this process in
runtime_inprocess.py, driver subprocesses and `rillet` commands in runtime_processes.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.integration.runtime_inprocess import (
    build_spec,
    driven,
    run_app,
    running,
    spark_conf,
    start_app,
    wait_to_end,
)
from tests.integration.runtime_kafka import (
    committed_offsets,
    copied_positions,
    create_topics,
    end_offsets,
    headers_of,
    json_values,
    produce,
    read_topic,
)
from tests.integration.runtime_processes import (
    cli,
    cli_env,
    cli_run,
    dump_stacks,
    jvms,
    killed_at_exit,
    maps,
    run_driver_to_end,
    start_driver,
)

__all__ = [
    "EXAMPLES",
    "REPO",
    "build_spec",
    "cli",
    "cli_env",
    "cli_run",
    "committed_offsets",
    "copied_positions",
    "create_topics",
    "driven",
    "dump_stacks",
    "end_offsets",
    "headers_of",
    "json_values",
    "jvms",
    "killed_at_exit",
    "load_manifests",
    "maps",
    "payments_filter",
    "privatize",
    "produce",
    "read_topic",
    "run_app",
    "run_driver_to_end",
    "running",
    "spark_conf",
    "start_app",
    "start_driver",
    "unique",
    "wait_to_end",
    "write_manifests",
]

REPO = Path(__file__).parents[2]
EXAMPLES = REPO / "examples"


def unique(prefix: str, name: str) -> str:
    """A Kafka topic name under the test's prefix."""
    return f"{prefix}.{name}"


def load_manifests(source: Path | str) -> list[dict[str, Any]]:
    """YAML documents from a file or a string."""
    text = source.read_text(encoding="utf-8") if isinstance(source, Path) else source
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]


def privatize(
    documents: list[dict[str, Any]],
    prefix: str,
    *,
    partitions: Mapping[str, int] | None = None,
) -> dict[str, str]:
    """Give every Topic and Table a Kafka topic under `prefix`; returns object -> topic name.

    `partitions` sets spec.partitions of the named Topics and Tables.
    """
    names: dict[str, str] = {}
    for document in documents:
        if document.get("kind") in ("Topic", "Table"):
            name = document["metadata"]["name"]
            spec = document.setdefault("spec", {})
            spec["topicName"] = names[name] = unique(prefix, name)
            if partitions and name in partitions:
                spec["partitions"] = partitions[name]
    return names


def write_manifests(documents: list[dict[str, Any]], path: Path) -> Path:
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False), encoding="utf-8")
    return path


_PAYMENTS_FILTER = """
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: payments}
spec: {partitions: %d}
---
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: payments-valid}
spec: {partitions: 1}
---
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: payments-dlq}
spec: {partitions: 1}
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata: {name: payments-filter, namespace: shop}
spec:
  image: rillet/spark-runtime:0.1.0
  inputs:
    - name: payments
      topicRef: {name: payments}
      schema: "id STRING, amount DECIMAL(10,2)"
      startingOffsets: earliest
  pipeline:
    sql: SELECT id, amount FROM payments WHERE amount > 0
  outputs:
    - topicRef: {name: payments-valid}
      keyColumns: [id]
  deadLetterTopic:
    topicRef: {name: payments-dlq}
"""


def payments_filter(partitions: int = 1) -> str:
    """Manifests of an App that keeps payments with a positive amount and dead-letters records
    it cannot read: its input Topic (`partitions` of them), its output and dead-letter Topics."""
    return _PAYMENTS_FILTER % partitions
