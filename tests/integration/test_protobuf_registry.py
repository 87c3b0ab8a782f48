"""Protobuf records against the stack's schema registry (Apicurio, Confluent-compatible API), read
and written by Rillet's Protobuf core as a driver and its workers would, without Spark.

Test plan (ground truth: confluent-kafka's ProtobufSerializer and ProtobufDeserializer, protoc,
the protobuf runtime's messages; a subject of the test's own, deleted afterwards):
- values ProtobufSerializer writes (it registers the schema as a base64 FileDescriptorProto)
  decode to the row of their values, with the schema as the registry serves it by id; a second
  version with one field more is accepted (BACKWARD) and each version's records read as the
  other's columns;
- a schema registered as `.proto` text (as Java clients register it) is served as text, which
  protoc compiles to the descriptor the unit tests build by hand; records of its id decode;
  an incompatible version (a field's type changed) is refused (HTTP 409);
- an output's derived schema, registered as text, is accepted; values the encoder writes with
  its id are read by ProtobufDeserializer, with the class protoc makes of the text the registry
  serves, as the message built by hand; protoc makes of that text the file `derive` made.

Findings these rest on (docs/formats.md): Apicurio serves a schema as it was registered, base64
or text; with `?format=serialized` it answers HTTP 500 for a base64 one and mangles a text one's
bytes, so ProtobufDeserializer with a registry client (which asks for that format) cannot read
from it; Rillet asks for neither.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2
from google.protobuf.message import Message

from rillet.runtime.queries import protocompiling, protofiles, protorecords, protoschemas
from rillet_devstack.schemaregistry import SchemaRegistryState
from tests import protoorders
from tests.protoorders import ORDER, ORDER_ROW


def served_files(registry: SchemaRegistryState, schema_id: int) -> protofiles.ProtoFiles:
    """A schema as a driver reads it: by id from a client that has not seen it (a cached one
    would hand back what it registered), in whichever form the registry serves it."""
    with SchemaRegistryClient(registry.client_config()) as fresh:
        schema = fresh.get_schema(schema_id)
    assert schema.schema_type == "PROTOBUF"
    return protocompiling.files_of(schema.schema_str, name=f"{schema_id}.proto")


def reading(
    registry: SchemaRegistryState, reader_id: int, writer_ids: list[int]
) -> protorecords.ProtoReading:
    reader = served_files(registry, reader_id)
    return protorecords.ProtoReading(
        reader=reader,
        message=protofiles.message_name(reader.main, None),
        writers={i: protorecords.writer_paths(served_files(registry, i)) for i in writer_ids},
    )


def schema_id_of(value: bytes) -> int:
    return int.from_bytes(value[1:5], "big")


def order_class(version: int) -> type[Message]:
    return protofiles.message_class(protoorders.order_files(version=version), ORDER)


def test_values_of_confluents_serializer_decode_to_their_values_across_versions(
    subject_topic: tuple[str, SchemaRegistryClient], schema_registry: SchemaRegistryState
) -> None:
    topic, client = subject_topic
    context = SerializationContext(topic, MessageField.VALUE)
    v1_class, v2_class = order_class(1), order_class(2)
    v1 = ProtobufSerializer(v1_class, client)(protoorders.built_order(v1_class), context)
    v2 = ProtobufSerializer(v2_class, client)(protoorders.built_order(v2_class), context)
    assert v1 is not None
    assert v2 is not None
    assert client.get_versions(f"{topic}-value") == [1, 2]
    v1_id, v2_id = schema_id_of(v1), schema_id_of(v2)

    with SchemaRegistryClient(schema_registry.client_config()) as fresh:
        served = fresh.get_schema(v1_id).schema_str
    assert protofiles.registered_file(served) == protoorders.order_file()  # base64, as given

    as_v1 = reading(schema_registry, v1_id, [v1_id, v2_id])
    as_v2 = reading(schema_registry, v2_id, [v1_id, v2_id])
    for record, row in [(v1, ORDER_ROW), (v2, ORDER_ROW)]:
        assert protorecords.decode(as_v1, record, input_name="orders").row == row
    assert protorecords.decode(as_v2, v1, input_name="orders").row == {**ORDER_ROW, "channel": ""}
    assert protorecords.decode(as_v2, v2, input_name="orders").row == {
        **ORDER_ROW,
        "channel": "web",
    }


def test_a_schema_registered_as_text_is_served_as_text_and_compiles(
    subject_topic: tuple[str, SchemaRegistryClient], schema_registry: SchemaRegistryState
) -> None:
    topic, client = subject_topic
    subject = f"{topic}-value"
    text_id = client.register_schema(subject, Schema(protoorders.ORDER_PROTO_V1, "PROTOBUF"))
    with SchemaRegistryClient(schema_registry.client_config()) as fresh:
        assert fresh.get_schema(text_id).schema_str == protoorders.ORDER_PROTO_V1

    compiled = served_files(schema_registry, text_id).main
    assert without_json_names(compiled, name=protoorders.NAME) == (
        protoorders.order_file().SerializeToString(deterministic=True)
    )
    value = protorecords.header(text_id, (0,)) + (
        protoorders.built_order(order_class(1)).SerializeToString()
    )
    decoded = protorecords.decode(
        reading(schema_registry, text_id, [text_id]), value, input_name="o"
    )
    assert decoded.row == ORDER_ROW

    changed = protoorders.ORDER_PROTO_V1.replace("int64 id = 1;", "string id = 1;")
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(changed, "PROTOBUF"))
    assert refused.value.http_status_code == 409, refused.value


def without_json_names(file: descriptor_pb2.FileDescriptorProto, *, name: str) -> bytes:
    """A compiled file as a built one: protoc fills in each field's JSON name, and names the
    file as it was given (by the registry's id here)."""
    copy = descriptor_pb2.FileDescriptorProto()
    copy.CopyFrom(file)
    copy.name = name
    messages = list(copy.message_type)
    while messages:
        message = messages.pop()
        messages.extend(message.nested_type)
        for field in message.field:
            field.ClearField("json_name")
    serialized: bytes = copy.SerializeToString(deterministic=True)
    return serialized


# An output's columns (StructType.jsonValue()) and a row of them.
RESULT: dict[str, Any] = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": False, "metadata": {}},
        {"name": "amount", "type": "decimal(10,2)", "nullable": True, "metadata": {}},
        {"name": "at", "type": "timestamp", "nullable": True, "metadata": {}},
        {
            "name": "counts",
            "type": {
                "type": "map",
                "keyType": "string",
                "valueType": "long",
                "valueContainsNull": False,
            },
            "nullable": False,
            "metadata": {},
        },
        {"name": "note", "type": "string", "nullable": True, "metadata": {}},
    ],
}
AT = datetime.datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=datetime.UTC)
RESULT_ROW = {
    "id": 3,
    "amount": decimal.Decimal("-7.25"),
    "at": AT,
    "counts": {"k": 5},
    "note": None,
}


def test_values_the_encoder_writes_with_a_derived_schema_read_back(
    subject_topic: tuple[str, SchemaRegistryClient], schema_registry: SchemaRegistryState
) -> None:
    topic, client = subject_topic
    name = protoschemas.message_name(f"{topic}_value")
    file = protoschemas.derive(
        RESULT, ["id", "amount", "at", "counts", "note"], name=name, what="t"
    )
    text = protoschemas.render(file)
    schema_id = client.register_schema(f"{topic}-value", Schema(text, "PROTOBUF"))
    files = protofiles.ProtoFiles.of([file])
    message = f"{protoschemas.PACKAGE}.{name}"
    value = protorecords.encode(protorecords.ProtoWriting(schema_id, files, message), RESULT_ROW)

    served = served_files(schema_registry, schema_id)
    served_class = protofiles.message_class(served, message)
    expected: Any = served_class(id=3)
    expected.amount.value, expected.amount.precision, expected.amount.scale = b"\xfd\x2b", 3, 2
    expected.at.seconds, expected.at.nanos = int(AT.timestamp()), 890_000_000
    expected.counts["k"] = 5
    assert ProtobufDeserializer(served_class, None, None)(value, None) == expected
    assert (
        value[:6]
        == protorecords.header(schema_id, (0,))
        == b"\0" + schema_id.to_bytes(4, "big") + b"\0"
    )
    assert without_json_names(served.main, name=file.name) == file.SerializeToString(
        deterministic=True
    )


def test_protoc_makes_of_a_derived_text_the_derived_file_and_names_mistakes() -> None:
    result = protoorders.RESULT  # every kind of column an output can have
    file = protoschemas.derive(
        result, [f["name"] for f in result["fields"]], name="Every", what="output every: value"
    )
    compiled = protocompiling.compile_text(protoschemas.render(file), name="every.proto").main
    assert without_json_names(compiled, name=file.name) == file.SerializeToString(
        deterministic=True
    )

    broken = protoschemas.render(file).replace("int64 id = 1;", "int64 id = 1")
    with pytest.raises(protofiles.ProtoSchemaError) as refused:
        protocompiling.compile_text(broken, name="every.proto")
    assert str(refused.value).startswith("every.proto does not compile: every.proto:")
    assert 'Expected ";"' in str(refused.value)
    assert "rillet-protoc-" not in str(refused.value)  # the scratch directory is not shown
