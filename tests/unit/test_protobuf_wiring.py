"""Protobuf wired into Apps, without Spark or a registry: what the operator resolves, the
expressions an output's records are made by, and the driver's catalog against a registry
held in memory (its answers as Confluent's client gives them).

Test plan (ground truth: the App as written, the descriptors built by hand in tests/protoorders
and the schemas a fake registry was given):
- an App with a protobuf input, a two-column protobuf key and an inline protobuf value
  validates; its run spec has each subject by TopicNameStrategy (or as given), the key stays
  protobuf (not json) with two columns, and carries the registry; without a registry it is
  InvalidSpec saying what to set; inline text that declares no such message, or another
  package, is InvalidSpec before any driver starts;
- a protobuf Table: its writer's output value is protobuf under `<changelog>-value` (its key
  stays string), a reader's tableRef input reads that subject; a Table's valueProtobuf is
  both's, its inline text checked as an output's; without a registry the reader is InvalidSpec;
- an output's protobuf value and key are calls of functions whose names are SQL identifiers,
  one per output and part; without its encoder the output is refused;
- the catalog: an input reads the latest version (text, compiled) as its reader, with every
  version (base64 or text) as a writer by id; an inline reader is compiled and its message
  checked; ids learned later are writers (a schema with a reference to another subject's file
  resolved) or unknown (another type, not in the registry); an output's derived schema is
  registered as text under its subject, a given one is checked against the columns, and a
  registry's 409 is a refusal naming the subject and the registry's message.
"""

from __future__ import annotations

import base64
import itertools
import re
from typing import Any

import pytest
from confluent_kafka.schema_registry import RegisteredSchema, Schema, SchemaReference
from confluent_kafka.schema_registry.error import SchemaRegistryError

from rillet.api.v1alpha1 import kinds
from rillet.driverapi import runspecs
from rillet.reconcile import manifests, protospecs, runresolving
from rillet.runtime.driver import protocatalog, registryasking
from rillet.runtime.queries import protofiles, protorecords, records
from tests import protoorders
from tests.protoorders import ORDER, RESULT

REGISTRY = runspecs.SchemaRegistry(url="http://registry:8080/apis/ccompat/v7")
SHOP = """syntax = "proto3";
package shop;
message Order {
  int64 id = 1;
  string customer = 2;
}
"""
API = {"apiVersion": "rillet.io/v1alpha1"}


def _documents() -> list[dict[str, Any]]:
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


def _run_spec(
    documents: list[dict[str, Any]], registry: runspecs.SchemaRegistry | None = REGISTRY
) -> runspecs.RunSpec:
    return manifests.build_run_spec_from_manifests(
        documents,
        bootstrap_servers="kafka:9092",
        checkpoint_location="/ck",
        schema_registry=registry,
    )


def test_a_protobuf_app_resolves_its_subjects_and_carries_the_registry() -> None:
    documents = _documents()
    kinds.parse(documents[-1])  # valid as written

    spec = _run_spec(documents)

    (item,) = spec.inputs
    (output,) = spec.outputs
    assert (item.format, item.protobuf) == (
        "protobuf",
        runspecs.ProtobufSpec(subject="orders-value"),
    )
    assert (output.key_format, output.key_protobuf) == (
        "protobuf",
        runspecs.ProtobufSpec(subject="out-key"),
    )
    assert output.value_protobuf == runspecs.ProtobufSpec(
        subject="s", inline_schema=SHOP, message="shop.Order"
    )
    assert spec.schema_registry == REGISTRY


def test_without_a_registry_or_with_a_message_the_text_lacks_the_app_is_refused() -> None:
    with pytest.raises(runresolving.UnresolvedError) as refused:
        _run_spec(_documents(), registry=None)
    assert refused.value.problems == [protospecs.NO_REGISTRY]

    for message, says in [
        ("shop.Refund", "declares no message Refund (message: shop.Refund)"),
        (
            "other.Order",
            "is of package shop: its messages' full names start with it (message: other.Order)",
        ),
    ]:
        documents = _documents()
        documents[-1]["spec"]["outputs"][0]["valueProtobuf"]["message"] = message
        with pytest.raises(runresolving.UnresolvedError) as refused:
            _run_spec(documents)
        assert refused.value.problems == [f"output topic-out: valueProtobuf.schema {says}"]


def _table_documents(value_protobuf: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The shop App writing a protobuf Table, and a reader App that reads it as a tableRef
    input and looks it up from a topic."""
    *topics, writer = _documents()
    table_spec: dict[str, Any] = {"valueFormat": "protobuf"}
    if value_protobuf is not None:
        table_spec["valueProtobuf"] = value_protobuf
    table = {**API, "kind": "Table", "metadata": {"name": "by-id"}, "spec": table_spec}
    writer["spec"]["outputs"] = [{"tableRef": {"name": "by-id"}, "keyColumns": ["id"]}]
    reader = {
        **API,
        "kind": "App",
        "metadata": {"name": "reader"},
        "spec": {
            "image": "rillet/spark-runtime:0.1.0",
            "inputs": [
                {
                    "name": "orders",
                    "topicRef": {"name": "orders"},
                    "format": "protobuf",
                    "lookups": [{"table": "known", "keyColumns": ["id"]}],
                },
                {"name": "known", "tableRef": {"name": "by-id"}},
            ],
            "pipeline": {"sql": "SELECT id, known.customer FROM orders"},
            "outputs": [{"topicRef": {"name": "out"}}],
        },
    }
    return [*topics, table, writer, reader]


def test_a_protobuf_table_is_written_and_read_under_its_changelog_subject() -> None:
    documents = _table_documents()
    for document in documents:
        kinds.parse(document)  # valid as written

    writer = manifests.build_run_spec_from_manifests(
        documents,
        bootstrap_servers="k:9092",
        app_name="shop",
        checkpoint_location="/ck",
        schema_registry=REGISTRY,
    )
    reader = manifests.build_run_spec_from_manifests(
        documents,
        bootstrap_servers="k:9092",
        app_name="reader",
        checkpoint_location="/ck",
        schema_registry=REGISTRY,
    )

    (table,) = writer.outputs
    assert (table.kind, table.key_format, table.key_protobuf) == ("table", "string", None)
    assert (table.value_format, table.value_protobuf) == (
        "protobuf",
        runspecs.ProtobufSpec(subject="by-id-value"),
    )
    assert writer.schema_registry == REGISTRY
    known = next(i for i in reader.inputs if i.name == "known")
    assert (known.kind, known.format, known.protobuf) == (
        "table",
        "protobuf",
        runspecs.ProtobufSpec(subject="by-id-value"),
    )


def test_a_protobuf_tables_given_message_is_its_writers_and_readers() -> None:
    given = {"schema": SHOP, "message": "shop.Order"}
    documents = _table_documents(given)
    writer, reader = (
        manifests.build_run_spec_from_manifests(
            documents,
            bootstrap_servers="k:9092",
            app_name=app,
            checkpoint_location="/ck",
            schema_registry=REGISTRY,
        )
        for app in ("shop", "reader")
    )
    expected = runspecs.ProtobufSpec(
        subject="by-id-value", inline_schema=SHOP, message="shop.Order"
    )
    assert writer.outputs[0].value_protobuf == expected
    assert next(i for i in reader.inputs if i.name == "known").protobuf == expected

    documents[-3]["spec"]["valueProtobuf"]["message"] = "shop.Refund"
    with pytest.raises(runresolving.UnresolvedError) as refused:
        manifests.build_run_spec_from_manifests(
            documents,
            bootstrap_servers="k:9092",
            app_name="shop",
            checkpoint_location="/ck",
            schema_registry=REGISTRY,
        )
    assert refused.value.problems == [
        "output table-by-id: valueProtobuf.schema declares no message Refund (message: shop.Refund)"
    ]
    with pytest.raises(runresolving.UnresolvedError) as refused:
        manifests.build_run_spec_from_manifests(
            _table_documents(),
            bootstrap_servers="k:9092",
            app_name="reader",
            checkpoint_location="/ck",
            schema_registry=None,
        )
    assert refused.value.problems == [protospecs.NO_REGISTRY]


def test_protobuf_keys_and_values_are_calls_of_the_outputs_encoders() -> None:
    output = _run_spec(_documents()).outputs[0]
    encoded = records.ProtoEncoded(key=True, value=True)

    exprs = records.build_record_exprs(output, ["id", "customer"], protobuf=encoded)

    value_name = records.proto_encoder_name(output.id, "value")
    key_name = records.proto_encoder_name(output.id, "key")
    assert exprs.value == f"{value_name}(struct(`id`, `customer`))"
    assert exprs.key == f"{key_name}(struct(`id`, `customer`))"
    names = {records.proto_encoder_name(i, p) for i in ("t-a.b", "t-a_b") for p in ("key", "v")}
    assert len(names) == 4
    assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) for name in names)
    with pytest.raises(ValueError, match="value is protobuf, and its schema is not resolved"):
        records.build_record_exprs(output, ["id", "customer"])


# The catalog against a registry in memory ---------------------------------------------------


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
