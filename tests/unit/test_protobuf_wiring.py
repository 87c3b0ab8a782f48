"""Protobuf wired into Apps, without Spark or a registry: what the operator resolves and the
expressions an output's records are made by (the driver's catalog against a registry held in
memory: test_protobuf_catalog).

Test plan (ground truth: the App as written):
- an App with a protobuf input, a two-column protobuf key and an inline protobuf value
  validates; its run spec has each subject by TopicNameStrategy (or as given), the key stays
  protobuf (not json) with two columns, and carries the registry; without a registry it is
  InvalidSpec saying what to set; inline text that declares no such message, or another
  package, is InvalidSpec before any driver starts;
- a protobuf Table: its writer's output value is protobuf under `<changelog>-value` (its key
  stays string), a reader's tableRef input reads that subject; a Table's valueProtobuf is
  both's, its inline text checked as an output's; without a registry the reader is InvalidSpec;
- an output's protobuf value and key are calls of functions whose names are SQL identifiers,
  one per output and part; without its encoder the output is refused.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from rillet.api.v1alpha1 import kinds
from rillet.driverapi import runspecs
from rillet.reconcile import manifests, protospecs, runparts
from rillet.runtime.queries import records
from tests import protoorders
from tests.protoorders import API, REGISTRY, SHOP

_documents = protoorders.shop_documents
_run_spec = protoorders.shop_run_spec


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
    with pytest.raises(runparts.UnresolvedError) as refused:
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
        with pytest.raises(runparts.UnresolvedError) as refused:
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
    with pytest.raises(runparts.UnresolvedError) as refused:
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
    with pytest.raises(runparts.UnresolvedError) as refused:
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
