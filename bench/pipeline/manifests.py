"""The word-count App's manifests the benchmarks run: examples/wordcount.yaml on the
benchmark's topics, a stateless copy of it, or the same count over lines in json, avro or
string values (`--only formats`).
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


# The word count of `--only formats`, over a view `lines` with a column `line`: the same SQL
# for every format, so only the decoding differs.
LINES_SQL = (
    "SELECT word, count(*) AS count FROM (SELECT explode(split(lower(line), '[^a-z0-9]+')) "
    "AS word FROM {lines}) WHERE word != '' GROUP BY word"
)
# A json input's columns; an avro or protobuf input's come from the registry (the subject's
# latest).
LINES_JSON_SCHEMA = "line STRING"


def formats_manifest(*, source: str, target: str, value_format: str) -> list[dict[str, Any]]:
    """examples/wordcount.yaml reading input `lines` in `value_format` (json: `{"line": ...}`;
    avro: records of one string field `line`, the subject <topic>-value; protobuf: messages of
    one string field `line`, likewise; string: the line as
    it is, the view's `value` renamed, the reference that decodes nothing)."""
    documents = app_manifest(source=source, target=target, stateless=False)
    app = documents[-1]["spec"]
    item: dict[str, Any] = {
        "name": "lines",
        "topicRef": app["inputs"][0]["topicRef"],
        "format": value_format,
        "startingOffsets": "earliest",
    }
    if value_format == "json":
        item["schema"] = LINES_JSON_SCHEMA
    app["inputs"] = [item]
    lines = "(SELECT value AS line FROM lines)" if value_format == "string" else "lines"
    app["pipeline"] = {"sql": LINES_SQL.format(lines=lines)}
    return documents
