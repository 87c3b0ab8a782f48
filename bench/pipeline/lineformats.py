"""The lines of `--only formats` as record values: a JSON object, Avro or Protobuf in the
Confluent wire format (their schemas registered in the local stack's registry), or the string
itself; and the registry's subjects the benchmark registers, deleted afterwards.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

import fastavro
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from bench.pipeline import feeding

LINE_SCHEMA = json.dumps(
    {"type": "record", "name": "Line", "fields": [{"name": "line", "type": "string"}]}
)
LINE_PROTO = 'syntax = "proto3";\n\npackage bench;\n\nmessage Line {\n  string line = 1;\n}\n'
_REGISTRY_ENV = (
    "RILLET_SCHEMA_REGISTRY_URL",
    "RILLET_SCHEMA_REGISTRY_USERNAME",
    "RILLET_SCHEMA_REGISTRY_PASSWORD",
)


def registry_environment() -> dict[str, str] | None:
    """The registry as `rillet dev env` exports it: from our environment, else the running
    local stack's; None when there is none."""
    if os.environ.get(_REGISTRY_ENV[0]):
        return {name: os.environ.get(name, "") for name in _REGISTRY_ENV}
    from rillet_devstack import stack

    state = stack.running()
    if state is None or state.schema_registry is None:
        return None
    return state.schema_registry.environment()


def registry_client(environment: dict[str, str]) -> SchemaRegistryClient:
    url, username, password = (environment[name] for name in _REGISTRY_ENV)
    config = {"url": url}
    if username:
        config["basic.auth.user.info"] = f"{username}:{password}"
    return SchemaRegistryClient(config)


def json_line(line: str) -> str:
    return json.dumps({"line": line})


def avro_encoder(client: SchemaRegistryClient, topic: str) -> feeding.Encode:
    """Lines as Avro records of LINE_SCHEMA, registered under <topic>-value (TopicNameStrategy).

    Framed here (zero byte, 4-byte id, fastavro's schemaless payload) rather than by
    AvroSerializer record by record, which is slower to produce a topic of millions; the frame
    is checked against AvroSerializer's bytes and AvroDeserializer's reading of a sample.
    """
    schema_id = client.register_schema(f"{topic}-value", Schema(LINE_SCHEMA, "AVRO"))
    parsed = fastavro.parse_schema(json.loads(LINE_SCHEMA))
    header = b"\x00" + schema_id.to_bytes(4, "big")

    def encode(line: str) -> bytes:
        payload = io.BytesIO()
        fastavro.schemaless_writer(payload, parsed, {"line": line})
        return header + payload.getvalue()

    check_frame(client, topic, encode)
    return encode


def check_frame(client: SchemaRegistryClient, topic: str, encode: feeding.Encode) -> None:
    """Our frame is the ecosystem's: the bytes AvroSerializer writes, and AvroDeserializer
    reads them back to the line."""
    context = SerializationContext(topic, MessageField.VALUE)
    sample = {"line": "word1 word22 word333"}
    theirs = AvroSerializer(client, LINE_SCHEMA)(sample, context)
    ours = encode(sample["line"])
    read: Any = AvroDeserializer(client)(ours, context)
    if ours != theirs or read != sample:
        raise AssertionError(f"Avro frame differs from the serializer's: {ours!r} {theirs!r}")


def delete_subjects(client: SchemaRegistryClient, topics: list[str]) -> None:
    """The value subjects of `topics`, soft- then hard-deleted (the registry keeps soft-deleted
    subjects, and their ids, otherwise)."""
    for topic in topics:
        for permanent in (False, True):
            client.delete_subject(f"{topic}-value", permanent=permanent)


def protobuf_encoder(client: SchemaRegistryClient, topic: str) -> feeding.Encode:
    """Lines as Protobuf messages of LINE_PROTO, registered as text under <topic>-value.

    Framed here (zero byte, 4-byte id, the message indexes of the first message: a lone 0,
    then the message's bytes), as avro_encoder frames its records; the frame is checked against
    ProtobufSerializer's bytes and ProtobufDeserializer's reading of a sample.
    """
    from rillet.runtime.queries import protocompiling, protofiles

    schema_id = client.register_schema(f"{topic}-value", Schema(LINE_PROTO, "PROTOBUF"))
    line_class = protofiles.message_class(
        protocompiling.compile_text(LINE_PROTO, name="bench/line.proto"), "bench.Line"
    )
    header = b"\x00" + schema_id.to_bytes(4, "big") + b"\x00"

    def encode(line: str) -> bytes:
        payload: bytes = line_class(line=line).SerializeToString()
        return header + payload

    context = SerializationContext(topic, MessageField.VALUE)
    sample = "word1 word22 word333"
    # The serializer registers its descriptor form, another schema: under a subject of its own,
    # so that the benchmark's subject keeps one version. Its bytes after the id must be ours.
    scratch = f"{topic}-frame-check"
    serializer = ProtobufSerializer(
        line_class, client, {"subject.name.strategy": lambda _context, _name: scratch}
    )
    try:
        theirs = serializer(line_class(line=sample), context)
    finally:
        for permanent in (False, True):
            client.delete_subject(scratch, permanent=permanent)
    read: Any = ProtobufDeserializer(line_class, {"use.deprecated.format": False})(
        encode(sample), context
    )
    if theirs is None or theirs[5:] != encode(sample)[5:] or read.line != sample:
        raise AssertionError(f"Protobuf frame differs from the serializer's: {theirs!r}")
    return encode
