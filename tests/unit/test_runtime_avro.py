"""Avro in the runtime and the operator, without Spark or a registry: the schemas an App's
output would register, the ids a stopped query names, and what the operator resolves.

Ground truth for derived schemas: fastavro's parser (the Avro runtime confluent-kafka's
serializers use) must accept them, with the defaults that keep added columns compatible.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pytest
import yaml

from rillet.api.v1alpha1 import recordschemas
from rillet.driverapi import runspecs
from rillet.reconcile import avrospecs, manifests
from rillet.runtime.queries import avrorecords, avroschemas
from rillet.tables import avrovalues

# A Spark result type as StructType.jsonValue() gives it.
STRUCT: dict[str, Any] = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": False, "metadata": {}},
        {"name": "amount", "type": "decimal(10,2)", "nullable": True, "metadata": {}},
        {"name": "at", "type": "timestamp", "nullable": True, "metadata": {}},
        {
            "name": "tags",
            "type": {"type": "array", "elementType": "string", "containsNull": True},
            "nullable": True,
            "metadata": {},
        },
        {
            "name": "window",
            "type": {
                "type": "struct",
                "fields": [
                    {"name": "start", "type": "timestamp", "nullable": True, "metadata": {}},
                    {"name": "end", "type": "timestamp", "nullable": True, "metadata": {}},
                ],
            },
            "nullable": False,
            "metadata": {},
        },
        {"name": "count(1)", "type": "long", "nullable": False, "metadata": {}},
        {
            "name": "bad_map",
            "type": {"type": "map", "keyType": "long", "valueType": "string"},
            "nullable": True,
            "metadata": {},
        },
    ],
}


def test_a_derived_schema_parses_and_its_nullable_columns_default_to_null() -> None:
    schema = avroschemas.derive(
        STRUCT, ["id", "amount", "at", "tags", "window"], name="orders_value", what="output o"
    )
    fastavro.parse_schema(schema)  # raises on a schema Avro refuses

    fields = {f["name"]: f for f in schema["fields"]}
    assert fields["id"] == {"name": "id", "type": "long"}
    assert fields["amount"]["type"][0] == "null"
    assert fields["amount"]["default"] is None
    assert fields["amount"]["type"][1]["logicalType"] == "decimal"
    assert fields["at"]["type"][1] == {"type": "long", "logicalType": "timestamp-micros"}
    assert fields["tags"]["type"][1] == {"type": "array", "items": ["null", "string"]}
    assert fields["window"]["type"]["type"] == "record"


def test_a_derived_schema_writes_a_row_that_reads_back_equal() -> None:
    schema = fastavro.parse_schema(
        avroschemas.derive(STRUCT, ["id", "tags", "amount"], name="r", what="output o")
    )
    row = {"id": 3, "tags": ["a", None], "amount": None}
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, schema, row)
    buffer.seek(0)
    assert fastavro.schemaless_reader(buffer, schema) == row


@pytest.mark.parametrize(
    ("column", "says"),
    [
        ("count(1)", "is not an Avro field name"),
        ("bad_map", "maps need string keys"),
    ],
)
def test_columns_avro_cannot_hold_are_refused_naming_the_fix(column: str, says: str) -> None:
    with pytest.raises(avroschemas.AvroSchemaError, match=r"output o: column") as refused:
        avroschemas.derive(STRUCT, [column], name="r", what="output o")
    assert says in str(refused.value)


def test_the_reader_gains_a_marker_that_defaults_to_true() -> None:
    reader = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
    marked = json.loads(avroschemas.with_decoded_marker(reader))

    assert marked["fields"][-1] == {
        "name": avroschemas.DECODED_MARKER,
        "type": "boolean",
        "default": True,
    }
    assert avroschemas.field_names(reader) == ["a"]


def test_a_stopped_query_names_the_ids_it_did_not_know_by_input() -> None:
    error = (
        "query app.topic-x failed: [USER_RAISED_EXCEPTION] "
        f"{avrorecords.UNKNOWN_ID_MARKER}: input orders schema id 42 SQLSTATE: P0001"
    )
    assert avrorecords.unknown_ids(error) == {"orders": {42}}
    assert avrorecords.unknown_ids("query failed: something else") == {}


def test_ids_the_registry_does_not_have_are_bad_records_and_others_stop_the_query() -> None:
    reader = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
    reading = avrorecords.AvroReading(
        reader=reader, writers={1: reader, 2: reader}, unknown=frozenset({7})
    )
    error = avrorecords.error_expr(reading, input_name="orders")
    decode = avrorecords.decode_exprs(reading)[-1]

    assert f"IN (7) THEN '{avrorecords.UNKNOWN_SCHEMA_ID}'" in error
    assert "NOT IN (1, 2) THEN raise_error" in error
    # A set marker is trusted before the id is read: only the headers of the writers the query
    # knows are decoded, so a record of any other id has no row and reaches the id's branches.
    assert error.index(avroschemas.DECODED_MARKER) < error.index("raise_error")
    assert decode.count("from_avro(") == 3  # the typing branch (never runs), ids 1 and 2
    assert "startswith(value, X'0000000001')" in decode
    assert "startswith(value, X'0000000002')" in decode
    assert "X'0000000007'" not in decode


def test_subjects_default_to_the_topic_name_strategy() -> None:
    value = avrospecs.avro_spec(None, topic="orders", part="value")
    key = avrospecs.avro_spec(recordschemas.AvroSchema(version=3), topic="orders", part="key")
    assert (value.subject, value.version) == ("orders-value", None)
    assert (key.subject, key.version) == ("orders-key", 3)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "is not JSON"),
        ('"string"', "is not an Avro record"),
        ('{"type": "record", "fields": []}', 'without a "name"'),
    ],
)
def test_an_inline_schema_that_is_not_a_record_is_a_spec_problem(text: str, says: str) -> None:
    problem = avrospecs.schema_problem(text)
    assert problem is not None
    assert says in problem
    assert (
        avrospecs.schema_problem(json.dumps({"type": "record", "name": "R", "fields": []})) is None
    )


EXAMPLE = Path(__file__).parents[2] / "examples" / "avro-orders.yaml"


def test_an_avro_table_is_written_and_read_under_its_changelog_subject() -> None:
    documents = list(yaml.safe_load_all(EXAMPLE.read_text()))
    reader = copy.deepcopy(documents[-1])
    reader["metadata"]["name"] = "reader"
    reader["spec"]["inputs"] = [{"name": "known", "tableRef": {"name": "orders-by-id"}}]
    reader["spec"]["pipeline"]["sql"] = "SELECT * FROM known"
    reader["spec"]["outputs"] = reader["spec"]["outputs"][:1]
    del reader["spec"]["deadLetterTopic"]
    registry = runspecs.SchemaRegistry(url="http://registry:8080/apis/ccompat/v7")

    def build(app: str) -> runspecs.RunSpec:
        return manifests.build_run_spec_from_manifests(
            [*documents, reader],
            bootstrap_servers="kafka:9092",
            app_name=app,
            checkpoint_location="/ck",
            schema_registry=registry,
        )

    writer = build("check-orders")
    (table,) = [o for o in writer.outputs if o.kind == "table"]
    assert table.value_format == "avro"
    assert table.value_avro == runspecs.AvroSpec(subject="orders-by-id-value")
    assert (table.key_format, table.key_avro) == ("string", None)
    (known,) = build("reader").inputs
    assert (known.kind, known.format) == ("table", "avro")
    assert known.avro == runspecs.AvroSpec(subject="orders-by-id-value")


@pytest.mark.parametrize(
    ("datum", "printed"),
    [
        (decimal.Decimal("12.50"), "12.50"),
        (datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC), "2026-01-02T03:04:05+00:00"),
        (datetime.date(2026, 1, 2), "2026-01-02"),
        (b"\x00\xff", "AP8="),
        ({"a": [1, None, {"b": b"\x01"}]}, {"a": [1, None, {"b": "AQ=="}]}),
    ],
)
def test_avro_values_print_as_json_without_losing_precision(datum: Any, printed: Any) -> None:
    assert avrovalues.json_ready(datum) == printed
    json.dumps(avrovalues.json_ready(datum))  # JSON can hold every part
