"""Protobuf keys and values of an App resolved for its driver: subjects defaulted, inline
schemas checked as far as can be without a compiler (pure).

As for Avro (avrospecs), a subject defaults to `<topic>-value` or `<topic>-key`, Confluent's
TopicNameStrategy. An inline `.proto` text is compiled by the driver (protoc is a child process
of the runtime, which the operator does not run); what can be told from the text alone, a
message it does not declare, is a problem of the App's spec (InvalidSpec), found before a
driver starts; so is Protobuf without a schema registry to hold the writers' schemas.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rillet.api.v1alpha1 import recordschemas
from rillet.driverapi import runspecs
from rillet.reconcile import avrospecs

NO_REGISTRY = (
    "format protobuf needs a schema registry, and the operator has none: set "
    "schemaRegistry.url in the chart's values (RILLET_SCHEMA_REGISTRY_URL)"
)
_PACKAGE = re.compile(r"^\s*package\s+([A-Za-z_][\w.]*)\s*;", re.MULTILINE)


def protobuf_spec(
    source: recordschemas.ProtobufSchema | None, *, topic: str, part: avrospecs.Part
) -> runspecs.ProtobufSpec:
    """Where the driver finds the schema of a topic's Protobuf keys or values."""
    source = source or recordschemas.ProtobufSchema()
    return runspecs.ProtobufSpec(
        subject=source.subject or avrospecs.default_subject(topic, part),
        inline_schema=source.schema_,
        message=source.message,
        version=source.version,
    )


def uses_protobuf(
    inputs: Iterable[runspecs.InputSpec], outputs: Iterable[runspecs.OutputSpec]
) -> bool:
    """Whether any input, output key or output value is Protobuf."""
    return any(i.protobuf is not None for i in inputs) or any(
        o.key_protobuf is not None or o.value_protobuf is not None for o in outputs
    )


def uses_registry(
    inputs: Iterable[runspecs.InputSpec], outputs: Iterable[runspecs.OutputSpec]
) -> bool:
    """Whether the App reads or writes anything whose schemas are in the registry."""
    inputs, outputs = tuple(inputs), tuple(outputs)
    return avrospecs.uses_avro(inputs, outputs) or uses_protobuf(inputs, outputs)


def message_problem(text: str, message: str) -> str | None:
    """Why an inline `.proto` text cannot hold `message` (a full name), or None: the text
    declares no message of its last name, or a package the name does not start with. Only
    protoc tells the rest (the driver runs it)."""
    *_, name = message.split(".")
    if not re.search(rf"\bmessage\s+{re.escape(name)}\s*\{{", text):
        return f"declares no message {name} (message: {message})"
    package = _PACKAGE.search(text)
    if package is not None and not message.startswith(f"{package.group(1)}."):
        return (
            f"is of package {package.group(1)}: its messages' full names start with it (message: "
            f"{message})"
        )
    return None


def problems(
    inputs: Iterable[runspecs.InputSpec],
    outputs: Iterable[runspecs.OutputSpec],
    *,
    registry: runspecs.SchemaRegistry | None,
) -> list[str]:
    """What keeps the App's Protobuf keys and values from working, as sentences."""
    named = [
        *((f"input {i.name}: protobuf.schema", i.protobuf) for i in inputs),
        *((f"output {o.id}: keyProtobuf.schema", o.key_protobuf) for o in outputs),
        *((f"output {o.id}: valueProtobuf.schema", o.value_protobuf) for o in outputs),
    ]
    used = [(where, spec) for where, spec in named if spec is not None]
    found = [
        f"{where} {problem}"
        for where, spec in used
        if spec.inline_schema is not None
        and spec.message is not None  # the API requires it with a schema
        and (problem := message_problem(spec.inline_schema, spec.message)) is not None
    ]
    if used and registry is None:
        found.insert(0, NO_REGISTRY)
    return found
