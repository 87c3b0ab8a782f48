"""Avro keys and values of an App resolved for its driver: subjects defaulted, inline schemas
checked (pure).

A subject defaults to `<topic>-value` or `<topic>-key`, Confluent's TopicNameStrategy, which its
serializers use, so an App reads what they wrote without naming the subject. An inline schema
that is not an Avro record is a problem of the App's spec (InvalidSpec), found before a driver
starts; so is Avro without a schema registry to hold the writers' schemas.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Literal

from rillet.api.v1alpha1 import recordschemas
from rillet.driverapi import runspecs

Part = Literal["key", "value"]
NO_REGISTRY = (
    "format avro needs a schema registry, and the operator has none: set schemaRegistry.url "
    "in the chart's values (RILLET_SCHEMA_REGISTRY_URL)"
)


def default_subject(topic: str, part: Part) -> str:
    """The subject of a topic's keys or values under TopicNameStrategy."""
    return f"{topic}-{part}"


def avro_spec(
    source: recordschemas.AvroSchema | None, *, topic: str, part: Part
) -> runspecs.AvroSpec:
    """Where the driver finds the schema of a topic's Avro keys or values."""
    source = source or recordschemas.AvroSchema()
    return runspecs.AvroSpec(
        subject=source.subject or default_subject(topic, part),
        inline_schema=source.schema_,
        version=source.version,
    )


def uses_avro(inputs: Iterable[runspecs.InputSpec], outputs: Iterable[runspecs.OutputSpec]) -> bool:
    """Whether any input, output key or output value is Avro."""
    return any(i.avro is not None for i in inputs) or any(
        o.key_avro is not None or o.value_avro is not None for o in outputs
    )


def schema_problem(text: str) -> str | None:
    """Why an inline schema is not an Avro record schema, or None."""
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as error:
        return f"is not JSON ({error.msg} at line {error.lineno} column {error.colno})"
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return 'is not an Avro record: write {"type": "record", "name": ..., "fields": [...]}'
    if not isinstance(schema.get("fields"), list) or not isinstance(schema.get("name"), str):
        return 'is an Avro record without a "name" or a list of "fields"'
    return None


def problems(
    inputs: Iterable[runspecs.InputSpec],
    outputs: Iterable[runspecs.OutputSpec],
    *,
    registry: runspecs.SchemaRegistry | None,
) -> list[str]:
    """What keeps the App's Avro keys and values from working, as sentences."""
    named = [
        *((f"input {i.name}: avro.schema", i.avro) for i in inputs),
        *((f"output {o.id}: keyAvro.schema", o.key_avro) for o in outputs),
        *((f"output {o.id}: valueAvro.schema", o.value_avro) for o in outputs),
    ]
    used = [(where, spec) for where, spec in named if spec is not None]
    found = [
        f"{where} {problem}"
        for where, spec in used
        if spec.inline_schema is not None
        and (problem := schema_problem(spec.inline_schema)) is not None
    ]
    if used and registry is None:
        found.insert(0, NO_REGISTRY)
    return found
