"""A Table's Protobuf values as `rillet table get` and Table servers print them
(runtime.queries.protojson), without a registry: a stand-in answers schemas by id.

Test plan (ground truth: the protobuf runtime's own messages, set field by field, framed with
confluent-kafka's wire-format header (`SchemaId.id_to_bytes`); the JSON written out here as
Protobuf's JSON mapping gives it, field names as declared, 64-bit integers as text):
- an order with every kind of field prints as written out here, its decimal as exact text;
  an empty one prints every field without presence at its default, and no others;
- decimals print exactly, negative ones and those of scale 0 too, inside repeated fields and
  map values as well;
- a value of another message of the schema (indexes [1]) prints as that message;
- values that do not decode say why: not in the wire format, an id the registry has not, a
  schema of another type, indexes the schema has not, a truncated payload; `text` puts the
  reason in angle brackets instead of raising;
- a schema is asked of the registry once per id.
"""

from __future__ import annotations

import base64
import decimal
import re
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.common.protobuf import decimal_to_protobuf
from confluent_kafka.schema_registry.common.serde import SchemaId
from confluent_kafka.schema_registry.error import SchemaRegistryError
from google.protobuf.message import Message

from rillet.runtime.queries import protocompiling, protofiles, protojson
from tests import protoorders

pytestmark = pytest.mark.unit

SCHEMA_ID = 42
ORDER_JSON = protoorders.ORDER_JSON


class Registry:
    """Answers get_schema as a registry does: the order schema in base64 form at SCHEMA_ID,
    an Avro schema at 2, 404 for any other id; counts what it was asked."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def get_schema(self, schema_id: int) -> Schema:
        self.asked.append(schema_id)
        if schema_id == SCHEMA_ID:
            serialized = protoorders.order_file().SerializeToString()
            return Schema(base64.b64encode(serialized).decode(), "PROTOBUF")
        if schema_id == 2:
            return Schema('{"type": "string"}', "AVRO")
        raise SchemaRegistryError(404, 40403, "Schema not found")

    def close(self) -> None:
        pass


def values() -> tuple[protojson.ProtoValues, Registry]:
    registry = Registry()
    decoder = protojson.ProtoValues({}, "orders", client=registry)  # type: ignore[arg-type]
    return decoder, registry


def message_class(name: str = protoorders.ORDER) -> type[Message]:
    return protofiles.message_class(protoorders.order_files(), name)


def framed(
    message: Message, *, indexes: list[int] | None = None, schema_id: int = SCHEMA_ID
) -> bytes:
    header = SchemaId("PROTOBUF", schema_id, None, indexes or [0]).id_to_bytes()
    return bytes(header + message.SerializeToString())


def test_an_order_prints_as_protobufs_json_with_its_decimal_as_text() -> None:
    decoder, _ = values()
    assert decoder.decoded(framed(protoorders.built_order(message_class()))) == ORDER_JSON


def test_an_empty_order_prints_the_fields_without_presence_at_their_defaults() -> None:
    decoder, _ = values()
    assert decoder.decoded(framed(message_class()())) == {
        "id": "0",
        "tags": [],
        "counts": {},
        "status": "NEW",
        "lines": [],
    }


@pytest.mark.parametrize(
    ("value", "scale", "text"),
    [
        ("-0.05", 2, "-0.05"),
        ("0", 0, "0"),
        ("123456789012345678901234567890", 0, "123456789012345678901234567890"),
        ("1.000", 3, "1.000"),
    ],
)
def test_decimals_print_exactly(value: str, scale: int, text: str) -> None:
    assert protojson.decimal_text(decimal_to_protobuf(decimal.Decimal(value), scale)) == text


def test_another_message_of_the_schema_prints_as_that_message() -> None:
    decoder, _ = values()
    refund: Any = message_class("rillet.test.Refund")(order_id=3)
    assert decoder.decoded(framed(refund, indexes=[1])) == {"order_id": "3"}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"\x00\x00", "not in the Confluent wire format"),
        (b"\x01\x00\x00\x00\x2a\x00", "not in the Confluent wire format"),
        (b"\x00\x00\x00\x00\x07\x00", "schema id 7 is not in the registry"),
        (b"\x00\x00\x00\x00\x02\x00", "is a AVRO schema, not a Protobuf one"),
        (b"\x00\x00\x00\x00\x2a\x02\x0a", "has no message at indexes [5]"),
    ],
)
def test_values_that_do_not_decode_say_why(value: bytes, reason: str) -> None:
    decoder, _ = values()
    with pytest.raises(protojson.ProtoValueError, match=re.escape(reason)):
        decoder.decoded(value)
    assert decoder.text(value).startswith("<undecodable protobuf value: ")


def test_a_truncated_payload_does_not_parse() -> None:
    decoder, _ = values()
    whole = framed(protoorders.built_order(message_class()))
    with pytest.raises(
        protojson.ProtoValueError, match=re.escape("does not parse as rillet.test.Order")
    ):
        decoder.decoded(whole[:-3])


def test_a_schema_is_asked_once_per_id() -> None:
    decoder, registry = values()
    for _ in range(3):
        decoder.text(framed(message_class()()))
    assert registry.asked == [SCHEMA_ID]


DECIMALS_PROTO = """syntax = "proto3";
import "confluent/type/decimal.proto";
message Prices {
  repeated confluent.type.Decimal list = 1;
  map<int32, confluent.type.Decimal> by_qty = 2;
  confluent.type.Decimal one = 3;
}
"""


def test_decimals_in_repeated_fields_and_map_values_print_as_text() -> None:
    files = protocompiling.compile_text(DECIMALS_PROTO, name="prices.proto")
    prices: Any = protofiles.message_class(files, "Prices")()
    # Each pool has its own Decimal class: copied over as bytes.
    for text in ("1.50", "-2"):
        prices.list.add().ParseFromString(_decimal_bytes(text))
    prices.by_qty[10].ParseFromString(_decimal_bytes("0.99"))
    assert protojson.to_json(prices) == {"list": ["1.50", "-2.00"], "by_qty": {"10": "0.99"}}


def _decimal_bytes(text: str) -> bytes:
    serialized: bytes = decimal_to_protobuf(decimal.Decimal(text), 2).SerializeToString()
    return serialized
