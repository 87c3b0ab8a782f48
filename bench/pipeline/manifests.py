"""The word-count App's manifests the benchmarks run: examples/wordcount.yaml on the
benchmark's topics, or a stateless copy of it.
"""

from __future__ import annotations

from typing import Any

import yaml

from bench.pipeline import settings


def app_manifest(
    *, source: str, target: str, stateless: bool, delivery: str | None = None
) -> list[dict[str, Any]]:
    """examples/wordcount.yaml on the given topics, or a stateless copy of it (real-time mode,
    and the delivery comparison: `delivery` of its Topic output)."""
    documents = list(yaml.safe_load_all((settings.REPO / "examples/wordcount.yaml").read_text()))
    for document in documents:
        if document["kind"] == "Topic":
            document["spec"]["topicName"] = source
        if document["kind"] == "Table":
            document["spec"]["topicName"] = target
    if stateless:  # each line, keyed by itself, to a Topic
        documents.insert(
            0,
            {
                "apiVersion": "rillet.io/v1alpha1",
                "kind": "Topic",
                "metadata": {"name": "lines"},
                "spec": {"partitions": 1, "topicName": target},
            },
        )
        documents[-1]["spec"]["pipeline"] = {"sql": "SELECT value AS line FROM sentences"}
        output: dict[str, Any] = {"topicRef": {"name": "lines"}, "keyColumns": ["line"]}
        if delivery:
            output["delivery"] = delivery
        documents[-1]["spec"]["outputs"] = [output]
    return documents
