"""What the tables of invalid Rillet objects are made of: a `Case`, and valid objects to spoil.

`topic`, `table` and `app` build a valid Topic, Table and App, with what a case changes merged
into its spec (`DROP` removes a key); `app_input` and `app_output` build one valid input and
output of an App. The tables themselves are per kind (invalid_topics.py, invalid_tables.py,
invalid_apps.py, invalid_app_inputs.py, invalid_app_outputs.py); invalid_crs.py joins them.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

API_VERSION = "rillet.io/v1alpha1"
IMAGE = "rillet/spark-runtime:0.1.0"
DROP = object()  # in an override: remove this key


@dataclasses.dataclass(frozen=True)
class Case:
    """One invalid object (or invalid change) and the expected error."""

    id: str
    manifest: dict[str, Any]
    expect: str
    before: dict[str, Any] | None = None
    # Where server-side apply words it differently (it builds a typed patch before validating).
    expect_ssa: str | None = None


def merged(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `override` merged in, recursively for mappings; DROP removes a key."""
    result = copy.deepcopy(dict(base))
    for key, value in override.items():
        if value is DROP:
            result.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def topic(spec: Mapping[str, Any] | None = None, name: str = "orders") -> dict[str, Any]:
    """A valid Topic, with `spec` merged into its spec."""
    base = {
        "apiVersion": API_VERSION,
        "kind": "Topic",
        "metadata": {"name": name},
        "spec": {"partitions": 3},
    }
    return merged(base, {"spec": spec or {}})


def table(spec: Mapping[str, Any] | None = None, name: str = "counts") -> dict[str, Any]:
    """A valid Table, with `spec` merged into its spec."""
    base = {
        "apiVersion": API_VERSION,
        "kind": "Table",
        "metadata": {"name": name},
        "spec": {"valueSchema": "word STRING, count BIGINT"},
    }
    return merged(base, {"spec": spec or {}})


WINDOW = {"type": "hopping", "size": "10m", "step": "5m", "expiry": "1h"}


def app(spec: Mapping[str, Any] | None = None, name: str = "wordcount") -> dict[str, Any]:
    """A valid App, with `spec` merged into its spec (lists are replaced, not merged)."""
    base = {
        "apiVersion": API_VERSION,
        "kind": "App",
        "metadata": {"name": name},
        "spec": {
            "image": IMAGE,
            "inputs": [{"name": "lines", "topicRef": {"name": "lines"}, "format": "string"}],
            "pipeline": {"sql": "SELECT value AS word, count(*) AS n FROM lines GROUP BY value"},
            "outputs": [{"tableRef": {"name": "counts"}, "keyColumns": ["word"]}],
        },
    }
    return merged(base, {"spec": spec or {}})


def app_input(**fields: Any) -> dict[str, Any]:
    """One input: a json Topic input with a schema, with `fields` merged in."""
    base = {"name": "clicks", "topicRef": {"name": "clicks"}, "schema": "page STRING"}
    return merged(base, fields)


def app_output(**fields: Any) -> dict[str, Any]:
    """One output: a Topic output, with `fields` merged in."""
    return merged({"topicRef": {"name": "out"}}, fields)


# An inline Protobuf schema (its text is the driver's to compile: the apiserver takes any).
PROTO = 'syntax = "proto3";\npackage shop;\nmessage Order { int64 id = 1; }\n'
