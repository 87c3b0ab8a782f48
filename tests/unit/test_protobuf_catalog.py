"""The driver's Protobuf catalog against a registry held in memory (its answers as Confluent's
client gives them), without Spark.

Test plan (ground truth: the descriptors built by hand in tests/protoorders and the schemas a
fake registry was given):
- an input reads the latest version (text, compiled) as its reader, with every version (base64
  or text) as a writer by id;
- an inline reader is compiled and its message checked; a subject with no Protobuf schema is a
  refusal;
- ids learned later are writers (a schema with a reference to another subject's file resolved)
  or unknown (another type, not in the registry);
- an output's derived schema is registered as text under its subject, a given one is checked
  against the columns (and nothing registered), and a registry's 409 is a refusal naming the
  subject and the registry's message.
"""

from __future__ import annotations

import base64
import itertools
from typing import Any

import pytest
from confluent_kafka.schema_registry import RegisteredSchema, Schema, SchemaReference
from confluent_kafka.schema_registry.error import SchemaRegistryError

from rillet.driverapi import runspecs
from rillet.runtime.driver import protocatalog, registryasking
from rillet.runtime.queries import protofiles, protorecords
from tests import protoorders
from tests.protoorders import ORDER, RESULT, SHOP

_run_spec = protoorders.shop_run_spec
_documents = protoorders.shop_documents


class FakeRegistry:
    """Confluent's client's calls the catalog makes, answered from memory as a registry would
    (404 for what it has not; 409 for a subject that refuses anything new)."""

    def __init__(self) -> None:
        self.subjects: dict[str, list[int]] = {}
        self.schemas: dict[int, Schema] = {}
        self.refusing: set[str] = set()
        self._ids = itertools.count(1)

    def add(self, subject: str, schema: Schema) -> int:
        schema_id = next(self._ids)
        self.schemas[schema_id] = schema
        self.subjects.setdefault(subject, []).append(schema_id)
        return schema_id

    def get_versions(self, subject: str) -> list[int]:
        if subject not in self.subjects:
            raise SchemaRegistryError(404, 40401, f"Subject '{subject}' not found.")
        return list(range(1, len(self.subjects[subject]) + 1))

    def get_version(self, subject: str, version: int) -> RegisteredSchema:
        ids = self.get_versions(subject) and self.subjects[subject]
        if not 0 < version <= len(ids):
            raise SchemaRegistryError(404, 40402, f"Version {version} not found.")
        schema_id = ids[version - 1]
        return RegisteredSchema(subject, version, schema_id, None, self.schemas[schema_id])

    def get_schema(self, schema_id: int) -> Schema:
        if schema_id not in self.schemas:
            raise SchemaRegistryError(404, 40403, f"Schema {schema_id} not found")
        return self.schemas[schema_id]

    def register_schema(self, subject: str, schema: Schema) -> int:
        if subject in self.refusing:
            raise SchemaRegistryError(409, 409, "Incompatible schema: field id changed type")
        return self.add(subject, schema)

    def close(self) -> None:
        pass


def _catalog(fake: FakeRegistry) -> protocatalog.ProtoCatalog:
    return protocatalog.ProtoCatalog(registryasking.Registry(fake))  # type: ignore[arg-type]


def _base64(file: Any) -> str:
    return base64.standard_b64encode(file.SerializeToString()).decode()


def _reading_spec(proto: runspecs.ProtobufSpec) -> runspecs.RunSpec:
    item = runspecs.InputSpec(
        name="orders", kind="topic", topic="orders", format="protobuf", protobuf=proto
    )
    return _run_spec(_documents()).model_copy(update={"inputs": (item,)})


def test_an_input_reads_the_latest_version_with_every_version_as_a_writer() -> None:
    fake = FakeRegistry()
    v1 = fake.add("orders-value", Schema(_base64(protoorders.order_file()), "PROTOBUF"))
    v2 = fake.add("orders-value", Schema(protoorders.ORDER_PROTO_V2, "PROTOBUF"))
    fake.add("orders-value", Schema('{"type": "string"}', "AVRO"))  # not a writer of Protobuf
    catalog = _catalog(fake)

    (reading,) = catalog.readings(
        _reading_spec(runspecs.ProtobufSpec(subject="orders-value"))
    ).values()

    assert reading.message == ORDER
    assert reading.columns[-1] == "channel"  # v2's field: the reader is the latest
    assert set(reading.writers) == {v1, v2}
    assert reading.writers[v1] == protofiles.message_paths(protoorders.order_file())
    assert reading.writers[v2][(1,)] == "rillet.test.Refund"


def test_an_inline_reader_is_compiled_and_its_message_checked() -> None:
    fake = FakeRegistry()
    fake.add("orders-value", Schema(_base64(protoorders.order_file()), "PROTOBUF"))
    inline = runspecs.ProtobufSpec(subject="orders-value", inline_schema=SHOP, message="shop.Order")

    (reading,) = _catalog(fake).readings(_reading_spec(inline)).values()
    assert (reading.message, reading.columns) == ("shop.Order", ["id", "customer"])

    wrong = inline.model_copy(update={"message": "shop.Nope"})
    with pytest.raises(protofiles.ProtoSchemaError, match=r"input orders: schema .* no message"):
        _catalog(fake).readings(_reading_spec(wrong))
    empty = runspecs.ProtobufSpec(subject="nothing-value")
    with pytest.raises(registryasking.SchemaRegistryRefusedError, match="no Protobuf schema"):
        _catalog(fake).readings(_reading_spec(empty))


def test_ids_learned_later_are_writers_with_their_references_or_unknown() -> None:
    fake = FakeRegistry()
    fake.add("orders-value", Schema(_base64(protoorders.order_file()), "PROTOBUF"))
    common = 'syntax = "proto3";\npackage shop;\nmessage Customer { string name = 1; }\n'
    fake.add("common", Schema(common, "PROTOBUF"))
    importing = (
        'syntax = "proto3";\npackage shop;\nimport "shop/common.proto";\n'
        "message Order { int64 id = 1; Customer customer = 2; }\n"
    )
    reference = SchemaReference("shop/common.proto", "common", 1)
    with_reference = fake.add("other", Schema(importing, "PROTOBUF", [reference]))
    avro = fake.add("avro", Schema('{"type": "string"}', "AVRO"))
    catalog = _catalog(fake)
    catalog.readings(_reading_spec(runspecs.ProtobufSpec(subject="orders-value")))

    catalog.learn("orders", {with_reference, avro, 404})

    (reading,) = catalog.readings(_reading_spec(runspecs.ProtobufSpec(subject="x"))).values()
    assert reading.writers[with_reference] == {(0,): "shop.Order"}
    assert reading.unknown == {avro, 404}
    assert catalog.reads("orders")


def _output(**protobuf: runspecs.ProtobufSpec) -> runspecs.OutputSpec:
    return runspecs.OutputSpec(
        id="topic-out",
        kind="topic",
        topic="orders.out",
        mode="append",
        key_columns=("id",),
        value_format="protobuf",
        key_format="protobuf" if "key_protobuf" in protobuf else "string",
        **protobuf,
    )


def test_an_outputs_derived_schema_is_registered_as_text_under_its_subject() -> None:
    fake = FakeRegistry()
    output = _output(
        key_protobuf=runspecs.ProtobufSpec(subject="orders.out-key"),
        value_protobuf=runspecs.ProtobufSpec(subject="orders.out-value"),
    )

    encodings = _catalog(fake).encodings(output, RESULT)

    assert encodings.value is not None
    assert encodings.key is not None
    assert encodings.value.message == "rillet.OrdersOutValue"
    assert encodings.key.message == "rillet.OrdersOutKey"
    (value_id,) = fake.subjects["orders.out-value"]
    assert encodings.value.schema_id == value_id
    registered = fake.schemas[value_id]
    assert registered.schema_type == "PROTOBUF"
    assert "message OrdersOutValue {" in (registered.schema_str or "")
    assert "  .confluent.type.Decimal amount = 2 [(confluent.field_meta)" in (
        registered.schema_str or ""
    )
    key_text = fake.schemas[fake.subjects["orders.out-key"][0]].schema_str
    assert key_text is not None
    assert "int64 id = 1;" in key_text


def test_a_given_message_must_hold_the_columns_and_a_refusal_names_the_subject() -> None:
    fake = FakeRegistry()
    shop = fake.add("shop-value", Schema(SHOP, "PROTOBUF"))
    given = runspecs.ProtobufSpec(subject="shop-value", version=1)
    with pytest.raises(protofiles.ProtoSchemaError) as refused:
        _catalog(fake).encodings(_output(value_protobuf=given), RESULT)
    assert "output topic-out: value: message shop.Order has no field amount, at," in str(
        refused.value
    )

    fits = {**RESULT, "fields": [f for f in RESULT["fields"] if f["name"] == "id"]}
    writing = _catalog(fake).encodings(_output(value_protobuf=given), fits).value
    assert writing is not None
    assert writing == protorecords.ProtoWriting(shop, writing.files, "shop.Order")
    assert fake.subjects["shop-value"] == [shop]  # a version given: nothing registered

    fake.refusing.add("orders.out-value")
    derived = runspecs.ProtobufSpec(subject="orders.out-value")
    with pytest.raises(registryasking.SchemaRegistryRefusedError) as stalled:
        _catalog(fake).encodings(_output(value_protobuf=derived), RESULT)
    assert str(stalled.value).startswith(
        "output topic-out: value: the schema registry refused the schema for subject "
        "orders.out-value (HTTP 409): Incompatible schema: field id changed type. Make the "
        "change compatible"
    )
