"""A Protobuf input's values decoded, and an output's rows encoded, by the Python stages of a
query (protostages), in local Spark without Kafka or a registry.

Test plan (ground truth: the protobuf runtime's own messages, set field by field and framed by
confluent-kafka's wire-format header; confluent-kafka's ProtobufDeserializer, which reads a
framed value given the message class; the kind each bad record was made to be), over rows
shaped as Spark's Kafka source gives them, in this process's session:
- the optimized plan of a protobuf input's view, of its bad records and of SQL that selects and
  filters the view calls the decoder once: Spark's optimizer copies it nowhere;
- records of two writer versions read as the reader's columns (v1 records with v2's field at
  its default; nested message, repeated fields, map, timestamp, decimal, wrapper, enum), a
  tombstone as a row of NULLs; bad records get their kind and a reason naming the id: a wrong
  magic byte and a value too short for a header (not-confluent-protobuf), an id the registry
  has not (unknown-schema-id), another message of the file (other-protobuf-message), a
  truncated payload (corrupt-protobuf); the dead letter keeps the value as it came;
- a record of an id the query does not know stops it with the line that makes the driver plan
  again, naming the input and the id; without a dead-letter topic a bad record stops the query
  naming its topic, partition, offset and kind;
- a Table's values (Table reads and lookups: no stage to split bad records off) read as the
  reader's rows, a value that does not decode as NULL, one of an id the query does not know
  stops it naming the Table's input and the id;
- an output's value and key, encoded by the functions registered for it, are read back by
  ProtobufDeserializer as the messages built by hand, with the schema id in their headers.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from confluent_kafka.schema_registry.common.serde import SchemaId
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from google.protobuf.message import Message
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (the customary alias)

from rillet.driverapi import runspecs
from rillet.runtime.driver import driving
from rillet.runtime.queries import (
    avrorecords,
    protofiles,
    protorecords,
    protostages,
    reading,
    records,
    writing,
)
from tests import protoorders
from tests.protoorders import ORDER, ORDER_ROW

from . import runtime_helpers as rt

AT = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
# Writers: v1 is id 1, v2 id 2; the registry has no id 99; id 3 is one the query never saw.
READING = protorecords.ProtoReading(
    reader=protoorders.order_files(version=2),
    message=ORDER,
    writers={
        1: protorecords.writer_paths(protoorders.order_files(version=1)),
        2: protorecords.writer_paths(protoorders.order_files(version=2)),
    },
    unknown=frozenset({99}),
)


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


def order_class(version: int, message: str = ORDER) -> type[Message]:
    return protofiles.message_class(protoorders.order_files(version=version), message)


def framed(message: Message, *, schema_id: int, indexes: Sequence[int] = (0,)) -> bytes:
    header = SchemaId("PROTOBUF", schema_id, None, list(indexes)).id_to_bytes()
    return bytes(header + message.SerializeToString())


def _parse(
    spark: SparkSession, values: Sequence[bytes | None], *, dead_letters: bool
) -> tuple[DataFrame, DataFrame | None]:
    item = runspecs.InputSpec(name="orders", kind="topic", topic="orders", format="protobuf")
    rows = [(b"k", value, "orders", 0, offset, AT) for offset, value in enumerate(values)]
    frame = spark.createDataFrame(
        rows,
        "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP",
    )
    return reading.parse_records(_spec(dead_letters=dead_letters), item, frame, None, READING)


def _decoders(frame: DataFrame) -> int:
    """How often the optimized plan calls the decoder."""
    return str(frame._jdf.queryExecution().optimizedPlan().toString()).count("decode_values(")


V1_ORDER = framed(protoorders.built_order(order_class(1)), schema_id=1)
V2_ORDER = framed(protoorders.built_order(order_class(2)), schema_id=2)


@pytest.mark.parametrize("dead_letters", [True, False])
def test_each_value_is_decoded_once_however_the_view_is_read(
    spark: SparkSession, dead_letters: bool
) -> None:
    view, bad = _parse(spark, [V2_ORDER], dead_letters=dead_letters)
    name = f"orders_{uuid.uuid4().hex}"
    view.createOrReplaceTempView(name)
    selected = spark.sql(f"SELECT address.city FROM {name} WHERE id > 0 AND channel <> 'pos'")

    assert _decoders(view) == 1
    assert _decoders(selected) == 1
    if bad is not None:
        assert _decoders(bad) == 1
    assert [r.city for r in selected.collect()] == ["Oslo"]


def test_versions_read_as_the_readers_columns_and_bad_records_get_their_kind(
    spark: SparkSession,
) -> None:
    refund = order_class(1, "rillet.test.Refund")(order_id=5)
    values = [
        V1_ORDER,
        V2_ORDER,
        None,  # a tombstone
        b"\x01" + V2_ORDER[1:],  # wrong magic byte
        b"\x00\x00\x01",  # too short for a header
        framed(protoorders.built_order(order_class(2)), schema_id=99),
        framed(refund, schema_id=1, indexes=(1,)),  # another message of the schema
        V2_ORDER[:20],  # truncated
    ]
    view, bad = _parse(spark, values, dead_letters=True)
    assert bad is not None

    rows = [r.asDict(recursive=True) for r in view.orderBy("offset").collect()]
    metadata = {"timestamp": AT.replace(tzinfo=None), "partition": 0}
    assert [{**r, "timestamp": r["timestamp"].replace(tzinfo=None)} for r in rows] == [
        {**ORDER_ROW, "at": _local(ORDER_ROW["at"]), "channel": "", **metadata, "offset": 0},
        {**ORDER_ROW, "at": _local(ORDER_ROW["at"]), "channel": "web", **metadata, "offset": 1},
        {**dict.fromkeys([*ORDER_ROW, "channel"]), **metadata, "offset": 2},
    ]
    reasons = bad.selectExpr(
        "offset", "value", records.ERROR, f"{protostages.reason_expr()} AS reason"
    )
    found = {r.offset: (r[records.ERROR], r.reason, r.value) for r in reasons.collect()}
    assert {offset: kind for offset, (kind, _, _) in found.items()} == {
        3: protorecords.NOT_CONFLUENT_PROTOBUF,
        4: protorecords.NOT_CONFLUENT_PROTOBUF,
        5: protorecords.UNKNOWN_SCHEMA_ID,
        6: protorecords.OTHER_MESSAGE,
        7: protorecords.CORRUPT_PROTOBUF,
    }
    assert found[5][1] == "schema id 99 is not a Protobuf schema in the schema registry"
    assert "message of schema id 1 other than" in found[6][1]
    assert "does not decode with schema id 2 " in found[7][1]
    assert found[7][2] == V2_ORDER[:20]  # the dead letter keeps the value as it came


def _local(instant: datetime.datetime) -> datetime.datetime:
    """A timestamp as collect() gives it: naive, in the session's zone (UTC here)."""
    return instant.astimezone(datetime.UTC).replace(tzinfo=None)


@pytest.mark.parametrize("dead_letters", [True, False])
def test_an_id_the_query_does_not_know_stops_it_to_be_planned_again(
    spark: SparkSession, dead_letters: bool
) -> None:
    values = [V2_ORDER, framed(protoorders.built_order(order_class(2)), schema_id=3)]
    view, _ = _parse(spark, values, dead_letters=dead_letters)

    with pytest.raises(PySparkException) as stopped:
        view.collect()
    assert avrorecords.unknown_ids(str(stopped.value)) == {"orders": {3}}


def test_a_tables_values_read_as_rows_bad_ones_as_null_and_a_new_id_stops_the_query(
    spark: SparkSession,
) -> None:
    frame = spark.createDataFrame(
        [(0, V1_ORDER), (1, V2_ORDER), (2, V2_ORDER[:20]), (3, b"\x01" + V2_ORDER[1:])],
        "offset BIGINT, value BINARY",
    )
    row = protostages.decoded_row(F.col("value"), READING, input_name="known")
    decoded = frame.select("offset", row.alias("r")).orderBy("offset").collect()

    assert [r.r.asDict(recursive=True) if r.r else None for r in decoded] == [
        {**ORDER_ROW, "at": _local(ORDER_ROW["at"]), "channel": ""},
        {**ORDER_ROW, "at": _local(ORDER_ROW["at"]), "channel": "web"},
        None,  # truncated: NULL, as an Avro Table's value that does not decode
        None,  # not in the wire format
    ]
    newer = spark.createDataFrame(
        [(framed(protoorders.built_order(order_class(2)), schema_id=3),)], "value BINARY"
    )
    with pytest.raises(PySparkException) as stopped:
        newer.select(protostages.decoded_row(F.col("value"), READING, input_name="known")).collect()
    assert avrorecords.unknown_ids(str(stopped.value)) == {"known": {3}}


def test_without_a_dead_letter_topic_a_bad_record_stops_the_query_naming_it(
    spark: SparkSession,
) -> None:
    view, bad = _parse(spark, [V2_ORDER, V2_ORDER[:20]], dead_letters=False)
    assert bad is None

    with pytest.raises(PySparkException) as stopped:
        view.collect()
    assert "bad record in topic orders partition 0 offset 1: corrupt-protobuf" in str(stopped.value)


def test_an_outputs_key_and_value_encode_to_what_confluents_deserializer_reads(
    spark: SparkSession,
) -> None:
    files = protoorders.order_files(version=1)
    output = runspecs.OutputSpec(
        id=f"topic-orders-{uuid.uuid4().hex[:6]}",
        kind="topic",
        topic="orders-out",
        mode="append",
        key_columns=("order_id",),
        value_columns=tuple(ORDER_ROW),
        key_format="protobuf",
        value_format="protobuf",
    )
    encodings = protorecords.ProtoEncodings(
        key=protorecords.ProtoWriting(8, files, "rillet.test.Refund"),
        value=protorecords.ProtoWriting(7, files, ORDER),
    )
    view, _ = _parse(spark, [V1_ORDER], dead_letters=True)
    result = view.selectExpr("*", "id AS order_id")
    protostages.register_encoders(spark, output, encodings)
    exprs = records.build_record_exprs(
        output, result.columns, protobuf=writing.proto_encoded(encodings)
    )

    (written,) = result.selectExpr(*exprs.select()).collect()
    value_class, key_class = order_class(1), order_class(1, "rillet.test.Refund")
    assert written.value[:6] == b"\x00\x00\x00\x00\x07\x00"
    assert written.key[:6] == b"\x00\x00\x00\x00\x08\x02"  # indexes [1]: count 1, index 1
    read: Any = ProtobufDeserializer(value_class, None, None)(bytes(written.value), None)
    assert read == protoorders.built_order(value_class)
    key: Any = ProtobufDeserializer(key_class, None, None)(bytes(written.key), None)
    assert key == key_class(order_id=7)
