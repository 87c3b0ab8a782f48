"""Protobuf records in the Confluent wire format, without Spark or a registry: the Spark type of
a message, records to rows and back, the schema derived for an output.

Test plan (ground truth: the protobuf runtime's own messages, set field by field and
serialized by it; confluent-kafka's wire-format header (`SchemaId.id_to_bytes`), decimal
encoding and ProtobufDeserializer, which reads a framed value without a registry; pyspark's
StructType and pyarrow, which must take the types and rows as they are):
- a message with every kind of field decodes to the row its values make, an empty one to
  what field presence says (defaults, NULLs, empty arrays and maps); the Spark type is the one
  written out here, and pyarrow builds an array of that type from the rows;
- rows encode to what ProtobufDeserializer reads back as the message built by hand, with the
  header Confluent's serializer writes for its message indexes (`[0]` a single zero byte);
- records of other messages of the file (indexes [1], [0, 0]) are told apart: another message
  than the input's is a bad record, the same message named as reader reads;
- evolution: a v2 record (one field more) reads as v1's columns, a v1 record as v2's with the
  new field at its default;
- bad records: too short, another magic byte, a truncated payload, a corrupt header, an id the
  registry has not, a decimal with more places than its column; an id the query does not know
  stops it with the line avrorecords.unknown_ids reads;
- a schema in base64 form is read as the registry serves it, text is left to protoc;
- an output's derived schema holds its columns: its messages' Spark types are the columns'
  types, rows round-trip through it, its text is as written out here; what Protobuf cannot hold
  is refused saying what to change.
"""

from __future__ import annotations

import base64
import datetime
import decimal
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry.common.protobuf import decimal_to_protobuf
from confluent_kafka.schema_registry.common.serde import SchemaId
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from google.protobuf.message import Message
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import StructType

from rillet.runtime.queries import (
    avrorecords,
    protocolumns,
    protofiles,
    protorecords,
    protoschemas,
)
from tests import protoorders
from tests.protoorders import (
    AT,
    EMPTY_ROW,
    ORDER,
    ORDER_ROW,
    RESULT,
    RESULT_ROW,
    array,
    column,
    map_of,
    struct,
)

SCHEMA_ID = 42


def order_class(*, version: int = 1, message: str = ORDER) -> type[Message]:
    return protofiles.message_class(protoorders.order_files(version=version), message)


def framed(
    message: Message, *, indexes: list[int] | None = None, schema_id: int = SCHEMA_ID
) -> bytes:
    header = SchemaId("PROTOBUF", schema_id, None, indexes or [0]).id_to_bytes()
    return bytes(header + message.SerializeToString())


def reading(
    *, version: int = 1, writers: dict[int, int] | None = None, message: str = ORDER
) -> protorecords.ProtoReading:
    """The order schema read as `version`, with writers of the given versions by id."""
    by_id = writers if writers is not None else {SCHEMA_ID: version}
    return protorecords.ProtoReading(
        reader=protoorders.order_files(version=version),
        message=message,
        writers={
            schema_id: protorecords.writer_paths(protoorders.order_files(version=v))
            for schema_id, v in by_id.items()
        },
        unknown=frozenset({13}),
    )


def decode(value: bytes, given: protorecords.ProtoReading | None = None) -> protorecords.Decoded:
    return protorecords.decode(given or reading(), value, input_name="orders")


def test_a_message_decodes_to_the_row_its_values_make() -> None:
    assert decode(framed(protoorders.built_order(order_class()))) == protorecords.Decoded(
        ORDER_ROW, None, SCHEMA_ID
    )


def test_an_empty_message_reads_as_field_presence_says() -> None:
    assert decode(framed(order_class()())) == protorecords.Decoded(EMPTY_ROW, None, SCHEMA_ID)


def test_the_spark_type_of_a_message_and_rows_that_fit_it() -> None:
    spark = StructType.fromJson(reading().struct_type())
    assert spark.simpleString() == (
        "struct<id:bigint,at:timestamp,amount:decimal(10,2),tags:array<string>,note:string,"
        "address:struct<city:string>,counts:map<string,int>,status:string,card:string,"
        "voucher:bigint,big:decimal(20,0),lines:array<struct<sku:string,qty:int>>>"
    )
    nullable = {field.name for field in spark.fields if field.nullable}
    assert nullable == {"at", "amount", "note", "address", "card", "voucher", "big"}
    assert reading().columns == list(ORDER_ROW)
    rows = pa.array([ORDER_ROW, EMPTY_ROW], type=to_arrow_type(spark, timezone="UTC"))
    assert rows.to_pylist(maps_as_pydicts="strict") == [ORDER_ROW, EMPTY_ROW]


def test_rows_encode_to_what_confluents_deserializer_reads() -> None:
    writing = protorecords.ProtoWriting(SCHEMA_ID, protoorders.order_files(), ORDER)
    value = protorecords.encode(writing, ORDER_ROW)
    assert (
        value[:6] == SchemaId("PROTOBUF", SCHEMA_ID, None, [0]).id_to_bytes() == b"\0\0\0\0\x2a\0"
    )
    assert ProtobufDeserializer(order_class(), None, None)(value, None) == protoorders.built_order(
        order_class()
    )
    assert decode(value).row == ORDER_ROW
    assert decode(protorecords.encode(writing, EMPTY_ROW)).row == EMPTY_ROW


@pytest.mark.parametrize(
    ("message", "indexes", "row"),
    [
        ("rillet.test.Refund", [1], {"order_id": 5}),
        ("rillet.test.Order.Address", [0, 0], {"city": "Oslo"}),
    ],
)
def test_other_messages_of_the_file_have_their_indexes(
    message: str, indexes: list[int], row: dict[str, Any]
) -> None:
    writing = protorecords.ProtoWriting(SCHEMA_ID, protoorders.order_files(), message)
    value = protorecords.encode(writing, row)
    header = SchemaId("PROTOBUF", SCHEMA_ID, None, indexes).id_to_bytes()
    assert value.startswith(header)
    parsed = protorecords.parse_header(value)
    assert parsed == protorecords.Header(SCHEMA_ID, tuple(indexes), len(header))
    assert ProtobufDeserializer(order_class(message=message), None, None)(value, None) == (
        order_class(message=message)(**row)
    )
    assert decode(value).error == protorecords.OTHER_MESSAGE
    assert decode(value, reading(message=message)).row == row


def test_a_newer_writer_reads_as_the_older_readers_columns_and_back() -> None:
    v2_record = framed(protoorders.built_order(order_class(version=2)), schema_id=2)
    v1_record = framed(protoorders.built_order(order_class()), schema_id=1)
    as_v1 = reading(version=1, writers={1: 1, 2: 2})
    as_v2 = reading(version=2, writers={1: 1, 2: 2})
    assert decode(v2_record, as_v1).row == ORDER_ROW
    assert decode(v2_record, as_v2).row == {**ORDER_ROW, "channel": "web"}
    assert decode(v1_record, as_v2).row == {**ORDER_ROW, "channel": ""}


@pytest.mark.parametrize(
    ("value", "kind", "schema_id"),
    [
        (b"\0\0\0", protorecords.NOT_CONFLUENT_PROTOBUF, None),
        (b"\x01\0\0\0\x2a\0\x08\x07", protorecords.NOT_CONFLUENT_PROTOBUF, None),
        (b"\0\0\0\0\x2a", protorecords.CORRUPT_PROTOBUF, SCHEMA_ID),  # no message indexes
        (b"\0\0\0\0\x2a\x02\x0e", protorecords.CORRUPT_PROTOBUF, SCHEMA_ID),  # no such message
        (b"\0\0\0\0\x2a\x02\x80", protorecords.CORRUPT_PROTOBUF, SCHEMA_ID),  # ends in a varint
        (b"\0\0\0\0\x2a\0\x12\x05ab", protorecords.CORRUPT_PROTOBUF, SCHEMA_ID),  # truncated
        (b"\0\0\0\0\x0d\0\x08\x07", protorecords.UNKNOWN_SCHEMA_ID, 13),
    ],
)
def test_bad_records_have_a_kind(value: bytes, kind: str, schema_id: int | None) -> None:
    assert decode(value) == protorecords.Decoded(None, kind, schema_id)


def test_a_decimal_with_more_places_than_its_column_is_a_bad_record() -> None:
    order: Any = order_class()()
    order.amount.ParseFromString(
        decimal_to_protobuf(decimal.Decimal("1.234"), 3).SerializeToString()
    )
    assert decode(framed(order)).error == protorecords.CORRUPT_PROTOBUF


def test_an_id_the_query_does_not_know_stops_it_naming_the_id() -> None:
    with pytest.raises(protorecords.UnknownSchemaIdError) as stopped:
        decode(framed(protoorders.built_order(order_class()), schema_id=77))
    assert avrorecords.unknown_ids(f"Python worker failed: {stopped.value}") == {"orders": {77}}


def test_values_of_timestamps_decimals_and_enums_as_spark_holds_them() -> None:
    writing = protorecords.ProtoWriting(SCHEMA_ID, protoorders.order_files(), ORDER)
    naive = datetime.datetime(2026, 1, 2, 3, 4, 5, 678901)  # as Spark's: UTC
    row = {"at": naive, "amount": decimal.Decimal("-1.28"), "status": 1}
    order: Any = ProtobufDeserializer(order_class(), None, None)(
        protorecords.encode(writing, row), None
    )
    assert (order.at.seconds, order.at.nanos) == (int(AT.timestamp()), 678901000)
    # As Java's BigInteger.toByteArray, which Confluent's serializers write: -128 in one byte.
    assert (order.amount.value, order.amount.scale) == (b"\x80", 2)
    assert decode(framed(order)).row == {**EMPTY_ROW, **row, "at": AT, "status": "PAID"}
    order.at.nanos = 678901999  # below Spark's microseconds: dropped
    order.status = 5  # a value of a later version of the enum
    assert decode(framed(order)).row is not None
    assert decode(framed(order)).row == {**EMPTY_ROW, **row, "at": AT, "status": "5"}


def test_a_schema_in_base64_is_read_as_the_registry_serves_it() -> None:
    file = protoorders.order_file()
    served = base64.standard_b64encode(file.SerializeToString()).decode()
    assert protofiles.registered_file(served) == file
    assert protofiles.registered_file(protoorders.ORDER_PROTO_V1) is None
    assert protofiles.message_name(file, None) == ORDER
    assert protofiles.message_name(file, "Refund") == "rillet.test.Refund"
    with pytest.raises(protofiles.ProtoSchemaError, match="no message Nope"):
        protofiles.message_name(file, "Nope")


# An output's derived schema ----------------------------------------------------------------------


def derived(columns: list[str] | None = None, result: dict[str, Any] = RESULT) -> Any:
    names = columns or [field["name"] for field in result["fields"]]
    return protoschemas.derive(result, names, name="OrdersValue", what="output orders: value")


def test_a_derived_schema_holds_the_columns_types_and_values() -> None:
    files = protofiles.ProtoFiles.of([derived()])
    message = "rillet.OrdersValue"
    spark = StructType.fromJson(protocolumns.struct_type(protofiles.descriptor(files, message)))
    assert spark.simpleString() == StructType.fromJson(RESULT).simpleString()
    writing = protorecords.ProtoWriting(SCHEMA_ID, files, message)
    given = protorecords.ProtoReading(
        reader=files, message=message, writers={SCHEMA_ID: protorecords.writer_paths(files)}
    )
    value = protorecords.encode(writing, RESULT_ROW)
    assert protorecords.decode(given, value, input_name="o").row == RESULT_ROW
    empty = {name: None for name in RESULT_ROW}
    row = protorecords.decode(given, protorecords.encode(writing, empty), input_name="o").row
    assert row == {**empty, "id": 0, "tags": [], "counts": {}, "lines": [], "prices": {}}


def test_a_derived_schemas_text() -> None:
    file = derived(["id", "amount", "at", "tags", "counts", "address"])
    assert protoschemas.render(file) == (
        'syntax = "proto3";\n'
        "\n"
        "package rillet;\n"
        "\n"
        'import "confluent/meta.proto";\n'
        'import "confluent/type/decimal.proto";\n'
        'import "google/protobuf/timestamp.proto";\n'
        "\n"
        "message OrdersValue {\n"
        "  message Address {\n"
        "    optional string city = 1;\n"
        "  }\n"
        "  int64 id = 1;\n"
        "  .confluent.type.Decimal amount = 2 [(confluent.field_meta) = {params: [{key: "
        '"precision", value: "10"}, {key: "scale", value: "2"}]}];\n'
        "  .google.protobuf.Timestamp at = 3;\n"
        "  repeated string tags = 4;\n"
        "  map<string, int64> counts = 5;\n"
        "  .rillet.OrdersValue.Address address = 6;\n"
        "}\n"
    )
    assert protoschemas.message_name("orders-enriched_value") == "OrdersEnrichedValue"


@pytest.mark.parametrize(
    ("kind", "refusal"),
    [
        (array(array("long")), "holds a array inside an array or map"),
        (map_of("string", array("long")), "holds a array inside an array or map"),
        (map_of("double", "long"), "a map with double keys"),
        ("interval day to second", "of type interval day to second, which Protobuf cannot"),
    ],
)
def test_columns_protobuf_cannot_hold_are_refused(kind: Any, refusal: str) -> None:
    with pytest.raises(protoschemas.ProtoDerivationError, match=refusal):
        derived(result=struct(column("c", kind)))
    with pytest.raises(protoschemas.ProtoDerivationError, match="'count\\(1\\)' is not a Pro"):
        derived(result=struct(column("count(1)", "long")))
