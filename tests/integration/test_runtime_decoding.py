"""A topic input's values are decoded once per record, into the same views and bad records.

Test plan: local Spark only, no Kafka: reading.parse_records over a batch of rows shaped as
Spark's Kafka source gives them (key, value, topic, partition, offset, timestamp), in this
process's session (the one the runtime tests share). Ground truth: values encoded by fastavro
and json.dumps, and the kind each bad record was made to be.
- the optimized plan of a json and an avro input's view, of its bad records, and of SQL that
  selects and filters the view decodes each value once (one from_json; one from_avro per writer
  the query knows), with a dead-letter topic and without: Spark's optimizer does not copy the
  decoding into the bad-record filter, the view's columns or the SQL's filter;
- avro with a dead-letter topic: records of two writer versions read as the reader's columns
  (the older with the added field's default), a tombstone as a row of NULLs; a wrong magic byte
  and a value too short for a header are not-confluent-avro, an id the registry does not have
  unknown-schema-id, a truncated payload corrupt-avro, each reason naming the id it read;
- avro: a record of an id the query does not know stops it with the marker that makes the
  driver plan again, naming the input and the id; without a dead-letter topic, a bad record
  stops it naming its topic, partition, offset and kind;
- json with a dead-letter topic: malformed-json and schema-mismatch, good rows as columns.
"""

from __future__ import annotations

import datetime
import io
import json
import struct
import uuid
from collections.abc import Sequence
from typing import Any

import fastavro
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from rillet.driverapi import runspecs
from rillet.runtime.driver import driving
from rillet.runtime.queries import avrorecords, reading, records

from . import runtime_helpers as rt

V1: dict[str, Any] = {
    "type": "record",
    "name": "order",
    "namespace": "t",
    "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"}],
}
V2: dict[str, Any] = {
    **V1,
    "fields": [*V1["fields"], {"name": "amount", "type": "double", "default": 0.5}],
}
WRITERS = {1: json.dumps(V1), 2: json.dumps(V2)}
# The registry has no schema 99; it has 3, which the query was planned without.
AVRO = avrorecords.AvroReading(reader=json.dumps(V2), writers=WRITERS, unknown=frozenset({99}))
DDL = "id BIGINT, customer STRING"
AT = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    """This process's local session, built as the runtime tests' Apps build it (they share it)."""
    run = driving.RunOptions(master="local[2]", spark_conf=rt.spark_conf())
    return driving.build_session(_spec(dead_letters=False), run)


def _spec(*, dead_letters: bool) -> runspecs.RunSpec:
    return runspecs.RunSpec(
        app="orders",
        namespace="t",
        consumer_group="rillet.t.orders",
        bootstrap_servers="127.0.0.1:9",
        checkpoint_location="/nonexistent/checkpoint",
        inputs=(),
        pipeline=runspecs.PipelineSpec(sql="SELECT 1"),
        outputs=(),
        shuffle_partitions=1,
        dead_letter_topic="orders-dead-letters" if dead_letters else None,
    )


def _avro(schema_id: int, schema: dict[str, Any], datum: dict[str, Any]) -> bytes:
    payload = io.BytesIO()
    fastavro.schemaless_writer(payload, fastavro.parse_schema(schema), datum)
    return b"\x00" + struct.pack(">I", schema_id) + payload.getvalue()


def _records(spark: SparkSession, values: Sequence[bytes | None]) -> DataFrame:
    rows = [(b"k", value, "orders", 0, offset, AT) for offset, value in enumerate(values)]
    return spark.createDataFrame(
        rows,
        "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP",
    )


def _parse(
    spark: SparkSession, fmt: str, values: Sequence[bytes | None], *, dead_letters: bool
) -> tuple[DataFrame, DataFrame | None]:
    item = runspecs.InputSpec(
        name="orders", kind="topic", topic="orders", format=fmt, value_schema=DDL
    )
    frame = _records(spark, values)
    return reading.parse_records(_spec(dead_letters=dead_letters), item, frame, AVRO)


def _decoders(frame: DataFrame, fmt: str) -> list[int]:
    """How often the optimized plan decodes: [from_json], or from_avro per known writer."""
    plan = str(frame._jdf.queryExecution().optimizedPlan().toString())
    if fmt == "json":
        return [plan.count("from_json(")]
    return [plan.count(f"{writer}, (mode,") for writer in WRITERS.values()]


GOOD_AVRO = _avro(2, V2, {"id": 1, "customer": "ada", "amount": 2.5})
GOOD_JSON = json.dumps({"id": 1, "customer": "ada"}).encode()


@pytest.mark.parametrize("fmt", ["avro", "json"])
@pytest.mark.parametrize("dead_letters", [True, False])
def test_each_value_is_decoded_once_however_the_view_is_read(
    spark: SparkSession, fmt: str, dead_letters: bool
) -> None:
    good = GOOD_AVRO if fmt == "avro" else GOOD_JSON
    view, bad = _parse(spark, fmt, [good], dead_letters=dead_letters)
    name = f"orders_{uuid.uuid4().hex}"
    view.createOrReplaceTempView(name)
    selected = spark.sql(f"SELECT customer FROM {name} WHERE id > 0 AND customer <> 'bob'")

    once = [1] if fmt == "json" else [1, 1]
    assert _decoders(view, fmt) == once
    assert _decoders(selected, fmt) == once
    if bad is not None:
        assert _decoders(bad, fmt) == once
    assert [r.customer for r in selected.collect()] == ["ada"]


def test_avro_versions_read_as_the_readers_columns_and_bad_records_get_their_kind(
    spark: SparkSession,
) -> None:
    truncated = _avro(2, V2, {"id": 3, "customer": "a long name to cut", "amount": 1.0})[:12]
    values = [
        _avro(1, V1, {"id": 1, "customer": "ada"}),
        _avro(2, V2, {"id": 2, "customer": "bob", "amount": 7.25}),
        None,  # a tombstone
        b"\x01" + GOOD_AVRO[1:],  # wrong magic byte
        b"\x00\x00\x01",  # too short for a header
        _avro(99, V2, {"id": 4, "customer": "cy", "amount": 1.0}),
        truncated,
    ]
    view, bad = _parse(spark, "avro", values, dead_letters=True)
    assert bad is not None

    rows = [r.asDict() for r in view.orderBy("offset").collect()]
    assert [(r["id"], r["customer"], r["amount"], r["offset"]) for r in rows] == [
        (1, "ada", 0.5, 0),  # v1 reads with v2's default
        (2, "bob", 7.25, 1),
        (None, None, None, 2),
    ]
    reasons = bad.selectExpr("offset", records.ERROR, f"{avrorecords.reason_expr()} AS reason")
    found = {r.offset: (r[records.ERROR], r.reason) for r in reasons.collect()}
    assert {offset: kind for offset, (kind, _) in found.items()} == {
        3: avrorecords.NOT_CONFLUENT_AVRO,
        4: avrorecords.NOT_CONFLUENT_AVRO,
        5: avrorecords.UNKNOWN_SCHEMA_ID,
        6: avrorecords.CORRUPT_AVRO,
    }
    assert "schema id 99 " in found[5][1]
    assert "schema id 2 " in found[6][1]
    # The dead letter keeps the record's value as it came.
    assert [r.value for r in bad.where("offset = 6").collect()] == [truncated]


@pytest.mark.parametrize("dead_letters", [True, False])
def test_an_avro_id_the_query_does_not_know_stops_it_to_be_planned_again(
    spark: SparkSession, dead_letters: bool
) -> None:
    values = [GOOD_AVRO, _avro(3, V2, {"id": 2, "customer": "bob", "amount": 1.0})]
    view, _ = _parse(spark, "avro", values, dead_letters=dead_letters)

    with pytest.raises(PySparkException) as stopped:
        view.collect()
    assert avrorecords.unknown_ids(str(stopped.value)) == {"orders": {3}}


@pytest.mark.parametrize("fmt", ["avro", "json"])
def test_without_a_dead_letter_topic_a_bad_record_stops_the_query_naming_it(
    spark: SparkSession, fmt: str
) -> None:
    good, kind = (GOOD_AVRO, "corrupt-avro") if fmt == "avro" else (GOOD_JSON, "malformed-json")
    view, bad = _parse(spark, fmt, [good, good[:-3]], dead_letters=False)
    assert bad is None

    with pytest.raises(PySparkException) as stopped:
        view.collect()
    assert f"bad record in topic orders partition 0 offset 1: {kind}" in str(stopped.value)
    assert "App orders has no deadLetterTopic" in str(stopped.value)


def test_json_bad_records_are_malformed_or_off_the_schema(spark: SparkSession) -> None:
    values = [
        GOOD_JSON,
        b'{"id": 2, "customer": ',
        json.dumps({"id": "two", "customer": "bob"}).encode(),
        None,
        json.dumps({"id": 5, "customer": "eve"}).encode(),
    ]
    view, bad = _parse(spark, "json", values, dead_letters=True)
    assert bad is not None

    rows = [(r.id, r.customer, r.offset) for r in view.orderBy("offset").collect()]
    assert rows == [(1, "ada", 0), (None, None, 3), (5, "eve", 4)]
    kinds = {r.offset: r[records.ERROR] for r in bad.collect()}
    assert kinds == {1: records.MALFORMED_JSON, 2: records.SCHEMA_MISMATCH}
