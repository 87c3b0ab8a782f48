"""A Protobuf order schema with what trips decoders up (nested and repeated messages, a map, an
enum, a oneof, a wrapper, a timestamp, a Confluent decimal, an unsigned 64-bit integer, a second
top-level message and a nested one), in two versions, as `.proto` text and as the
FileDescriptorProto protoc makes of it, built here field by field so that unit tests need no
compiler (the registry's tests check that protoc makes the same of the text); and an order.
Also an output's columns of every kind (a Spark struct type) and a row of them; and the shop
App (a Protobuf input, a two-column Protobuf key and an inline Protobuf value) with its run spec.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

from confluent_kafka.schema_registry.common.protobuf import decimal_to_protobuf
from google.protobuf import descriptor_pb2
from google.protobuf.message import Message

from rillet.driverapi import runspecs
from rillet.reconcile import manifests
from rillet.runtime.queries import protofiles

F = descriptor_pb2.FieldDescriptorProto
NAME = "rillet/test/order.proto"
ORDER = "rillet.test.Order"
ORDER_PROTO_V1 = """syntax = "proto3";

package rillet.test;

import "confluent/meta.proto";
import "confluent/type/decimal.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message Order {
  message Address {
    string city = 1;
  }
  message Line {
    string sku = 1;
    int32 qty = 2;
  }
  enum Status {
    NEW = 0;
    PAID = 1;
  }
  int64 id = 1;
  google.protobuf.Timestamp at = 2;
  confluent.type.Decimal amount = 3 [(confluent.field_meta) = {
    params: [{key: "precision", value: "10"}, {key: "scale", value: "2"}]
  }];
  repeated string tags = 4;
  google.protobuf.StringValue note = 5;
  Address address = 6;
  map<string, int32> counts = 7;
  Status status = 8;
  oneof payment {
    string card = 9;
    int64 voucher = 10;
  }
  optional uint64 big = 11;
  repeated Line lines = 12;
}

message Refund {
  int64 order_id = 1;
}
"""
# Version 2 adds a field: BACKWARD compatible (a reader of v2 sees "" in v1's records).
ORDER_PROTO_V2 = ORDER_PROTO_V1.replace(
    "  repeated Line lines = 12;\n", "  repeated Line lines = 12;\n  string channel = 13;\n"
)


def order_file(*, version: int = 1) -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of ORDER_PROTO_V1 (or _V2)."""
    file = descriptor_pb2.FileDescriptorProto(name=NAME, package="rillet.test", syntax="proto3")
    file.dependency.extend(
        [
            "confluent/meta.proto",
            "confluent/type/decimal.proto",
            "google/protobuf/timestamp.proto",
            "google/protobuf/wrappers.proto",
        ]
    )
    order = file.message_type.add(name="Order")
    order.nested_type.add(name="Address").field.add(
        name="city", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL
    )
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    line.field.add(name="qty", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    entry = order.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    status = order.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="PAID", number=1)
    order.oneof_decl.add(name="payment")
    order.oneof_decl.add(name="_big")

    def add(name: str, number: int, kind: int, type_name: str = "", **more: Any) -> Any:
        label = more.pop("label", F.LABEL_OPTIONAL)
        if type_name:  # set even when empty, it would be a type name
            more["type_name"] = type_name
        return order.field.add(name=name, number=number, type=kind, label=label, **more)

    add("id", 1, F.TYPE_INT64)
    add("at", 2, F.TYPE_MESSAGE, ".google.protobuf.Timestamp")
    amount = add("amount", 3, F.TYPE_MESSAGE, ".confluent.type.Decimal")
    meta = amount.options.Extensions[protofiles.FIELD_META]
    meta.params["precision"], meta.params["scale"] = "10", "2"
    add("tags", 4, F.TYPE_STRING, label=F.LABEL_REPEATED)
    add("note", 5, F.TYPE_MESSAGE, ".google.protobuf.StringValue")
    add("address", 6, F.TYPE_MESSAGE, ".rillet.test.Order.Address")
    add("counts", 7, F.TYPE_MESSAGE, ".rillet.test.Order.CountsEntry", label=F.LABEL_REPEATED)
    add("status", 8, F.TYPE_ENUM, ".rillet.test.Order.Status")
    add("card", 9, F.TYPE_STRING, oneof_index=0)
    add("voucher", 10, F.TYPE_INT64, oneof_index=0)
    add("big", 11, F.TYPE_UINT64, oneof_index=1, proto3_optional=True)
    add("lines", 12, F.TYPE_MESSAGE, ".rillet.test.Order.Line", label=F.LABEL_REPEATED)
    if version == 2:
        add("channel", 13, F.TYPE_STRING)
    refund = file.message_type.add(name="Refund")
    refund.field.add(name="order_id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    return file


def order_files(*, version: int = 1) -> protofiles.ProtoFiles:
    """The order schema as a query holds it."""
    return protofiles.ProtoFiles.of([order_file(version=version)])


AT = datetime.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.UTC)
# An order's row, every column of v1 set, as a Spark row of the reader's columns holds it.
ORDER_ROW: dict[str, Any] = {
    "id": 7,
    "at": AT,
    "amount": decimal.Decimal("12.34"),
    "tags": ["a", "b"],
    "note": "ring twice",
    "address": {"city": "Oslo"},
    "counts": {"x": 1, "y": 2},
    "status": "PAID",
    "card": None,
    "voucher": 99,
    "big": decimal.Decimal(2**64 - 1),
    "lines": [{"sku": "s1", "qty": 2}, {"sku": "s2", "qty": 0}],
}
# The order as `rillet table get` and Table servers print it (runtime.queries.protojson):
# Protobuf's JSON mapping (64-bit integers as text, the timestamp in RFC 3339), the decimal as
# exact text, unset fields with presence left out.
ORDER_JSON: dict[str, Any] = {
    "id": "7",
    "at": "2026-01-02T03:04:05.678901Z",
    "amount": "12.34",
    "tags": ["a", "b"],
    "note": "ring twice",
    "address": {"city": "Oslo"},
    "counts": {"x": 1, "y": 2},
    "status": "PAID",
    "voucher": "99",
    "big": "18446744073709551615",
    "lines": [{"sku": "s1", "qty": 2}, {"sku": "s2", "qty": 0}],
}
# The same with nothing set: what Protobuf's presence makes of each column.
EMPTY_ROW: dict[str, Any] = {
    "id": 0,
    "at": None,
    "amount": None,
    "tags": [],
    "note": None,
    "address": None,
    "counts": {},
    "status": "NEW",
    "card": None,
    "voucher": None,
    "big": None,
    "lines": [],
}


def built_order(order_class: type[Message]) -> Message:
    """ORDER_ROW's order as a message of `order_class` (v1 or v2: then with channel "web"),
    set with the protobuf runtime's own API."""
    order: Any = order_class(id=7, tags=["a", "b"], status=1, voucher=99)
    order.big = 2**64 - 1
    order.at.seconds, order.at.nanos = int(AT.timestamp()), AT.microsecond * 1000
    order.amount.ParseFromString(
        decimal_to_protobuf(decimal.Decimal("12.34"), 2).SerializeToString()
    )
    order.note.value = "ring twice"
    order.address.city = "Oslo"
    order.counts["x"], order.counts["y"] = 1, 2
    order.lines.add(sku="s1", qty=2)
    order.lines.add(sku="s2")
    if "channel" in order_class.DESCRIPTOR.fields_by_name:
        order.channel = "web"
    return order


def column(name: str, kind: Any, *, nullable: bool = True) -> dict[str, Any]:
    return {"name": name, "type": kind, "nullable": nullable, "metadata": {}}


def array(element: Any) -> dict[str, Any]:
    return {"type": "array", "elementType": element, "containsNull": False}


def map_of(key: Any, value: Any) -> dict[str, Any]:
    return {"type": "map", "keyType": key, "valueType": value, "valueContainsNull": False}


def struct(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "fields": list(fields)}


# A Spark result type as StructType.jsonValue() gives it, with one column of each kind.
RESULT = struct(
    column("id", "long", nullable=False),
    column("amount", "decimal(10,2)"),
    column("at", "timestamp"),
    column("tags", array("string"), nullable=False),
    column("counts", map_of("string", "long"), nullable=False),
    column("address", struct(column("city", "string"))),
    column("day", "date"),
    column(
        "lines", array(struct(column("sku", "string"), column("qty", "integer"))), nullable=False
    ),
    column("prices", map_of("integer", "decimal(12,3)"), nullable=False),
    column("paid", "boolean"),
    column("raw", "binary"),
    column("ratio", "double"),
    column("score", "float"),
)
RESULT_ROW: dict[str, Any] = {
    "id": 1,
    "amount": decimal.Decimal("-0.50"),
    "at": AT,
    "tags": ["x"],
    "counts": {"a": 2**40},
    "address": {"city": None},
    "day": datetime.date(2026, 2, 28),
    "lines": [{"sku": "s", "qty": None}],
    "prices": {3: decimal.Decimal("1.250")},
    "paid": False,
    "raw": b"\0\xff",
    "ratio": 0.25,
    "score": None,
}

# The schema registry the shop App's run spec names.
REGISTRY = runspecs.SchemaRegistry(url="http://registry:8080/apis/ccompat/v7")
# The shop App's output value, inline: a message other than the registry's Order.
SHOP = """syntax = "proto3";
package shop;
message Order {
  int64 id = 1;
  string customer = 2;
}
"""
# What every Rillet object's document starts with.
API = {"apiVersion": "rillet.io/v1alpha1"}


def shop_documents() -> list[dict[str, Any]]:
    """The shop App (reading orders, writing out) and its two Topics."""
    topics = [
        {**API, "kind": "Topic", "metadata": {"name": name}, "spec": {"partitions": 1}}
        for name in ("orders", "out")
    ]
    app = {
        **API,
        "kind": "App",
        "metadata": {"name": "shop"},
        "spec": {
            "image": "rillet/spark-runtime:0.1.0",
            "inputs": [{"name": "orders", "topicRef": {"name": "orders"}, "format": "protobuf"}],
            "pipeline": {"sql": "SELECT id, customer FROM orders"},
            "outputs": [
                {
                    "topicRef": {"name": "out"},
                    "keyColumns": ["id", "customer"],
                    "keyFormat": "protobuf",
                    "valueFormat": "protobuf",
                    "valueProtobuf": {"schema": SHOP, "message": "shop.Order", "subject": "s"},
                }
            ],
        },
    }
    return [*topics, app]


def shop_run_spec(
    documents: list[dict[str, Any]], registry: runspecs.SchemaRegistry | None = REGISTRY
) -> runspecs.RunSpec:
    """The run spec of the one App in `documents`, with the schema registry `registry`."""
    return manifests.build_run_spec_from_manifests(
        documents,
        bootstrap_servers="kafka:9092",
        checkpoint_location="/ck",
        schema_registry=registry,
    )
