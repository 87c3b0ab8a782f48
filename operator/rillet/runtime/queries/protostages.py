"""Protobuf's stages of a query: records decoded and encoded by Python functions over Arrow
batches (Spark's arrow_udf), as spark-protobuf would in the JVM had it an artifact for Spark
4.2 (decision 020).

Reading, a topic input's values go through one decoder per query, which gives each record's row
of the reader message's columns, its error kind (protorecords: `not-confluent-protobuf`,
`unknown-schema-id`, `other-protobuf-message`, `corrupt-protobuf`) and its writer's id, as one
struct. The decoder is marked nondeterministic, which keeps Spark's optimizer from copying it
into the bad-record filter or the view's columns (records.computed_once says why it would): each
record is decoded once per query. A record of an id the query does not know fails its task
with protorecords.UnknownSchemaIdError, whose line the driver reads to learn the id and plan
again (avrorecords.unknown_ids), as for Avro.

Writing, an output's protobuf key or value is a function registered in the session under
`records.proto_encoder_name`, which the output's SQL expressions call with the struct of its
columns; it writes the wire format with the output's registered schema id.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (the customary alias)
from pyspark.sql.pandas.functions import arrow_udf
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import BinaryType, StructType

from rillet.driverapi import runspecs
from rillet.runtime.queries import avrorecords, protorecords, records

DECODED = "__rillet_decoded"
SCHEMA_ID = avrorecords.SCHEMA_ID
# pyspark tells a scalar arrow UDF by its type hints (pa.Array in, pa.Array out: naming the kind
# instead is deprecated, a warning); its stubs want pyarrow's types, which pyarrow does not type.
_ARROW_UDF: Any = arrow_udf


def decoded_type(reading: protorecords.ProtoReading) -> StructType:
    """The Spark type of a decoded record: its row, its error kind, its writer's id."""
    row = {"name": "row", "type": reading.struct_type(), "nullable": True, "metadata": {}}
    error = {"name": "error", "type": "string", "nullable": True, "metadata": {}}
    schema_id = {"name": "schema_id", "type": "long", "nullable": True, "metadata": {}}
    return StructType.fromJson({"type": "struct", "fields": [row, error, schema_id]})


def decode_batch(
    values: pa.Array,
    *,
    reading: protorecords.ProtoReading,
    input_name: str,
    arrow_type: pa.DataType,
) -> pa.Array:
    """One Arrow batch of values (BINARY) decoded (decoded_type, as Arrow's `arrow_type`)."""
    decoded: list[dict[str, Any]] = []
    for value in values.to_pylist():
        if value is None:  # a tombstone: no row, and not a bad record
            decoded.append({"row": None, "error": None, "schema_id": None})
            continue
        found = protorecords.decode(reading, value, input_name=input_name)
        decoded.append({"row": found.row, "error": found.error, "schema_id": found.schema_id})
    return pa.array(decoded, type=arrow_type)


def decoder(reading: protorecords.ProtoReading, *, input_name: str) -> Any:
    """The arrow UDF decoding an input's values (see the module's docstring)."""
    spark_type = decoded_type(reading)
    arrow_type = to_arrow_type(spark_type, timezone="UTC")

    def decode_values(values: pa.Array) -> pa.Array:
        return decode_batch(values, reading=reading, input_name=input_name, arrow_type=arrow_type)

    return _ARROW_UDF(decode_values, spark_type).asNondeterministic()


def decode_stages(
    stream: DataFrame, reading: protorecords.ProtoReading, *, input_name: str
) -> DataFrame:
    """A Protobuf input's raw columns with each record's row (records.ROW), error kind
    (records.ERROR, NULL for a good record) and writer's id (SCHEMA_ID)."""
    decode: Column = decoder(reading, input_name=input_name)(F.col("value"))
    decoded = stream.select(*records.RAW_COLUMNS, decode.alias(DECODED))
    return decoded.selectExpr(
        *records.RAW_COLUMNS,
        f"{DECODED}.row AS {records.ROW}",
        f"{DECODED}.error AS {records.ERROR}",
        f"{DECODED}.schema_id AS {SCHEMA_ID}",
    )


def decoded_row(values: Column, reading: protorecords.ProtoReading, *, input_name: str) -> Column:
    """A Table's Protobuf values (BINARY) as structs of the reader's fields, for Table reads and
    lookups, which have no stage to split bad records off: a value that is not in the wire
    format or does not parse reads as NULL, as an Avro Table's does; one of an id the query
    does not know stops it (protorecords.UnknownSchemaIdError), to be planned again."""
    decoded: Column = decoder(reading, input_name=input_name)(values)
    return decoded.getField("row")


def reason_expr() -> str:
    """A sentence for the error kind of a bad Protobuf record."""
    return (
        f"CASE {records.ERROR} WHEN '{protorecords.NOT_CONFLUENT_PROTOBUF}' THEN 'value is not "
        f"in the Confluent wire format (a zero byte, then a 4-byte schema id)' "
        f"WHEN '{protorecords.UNKNOWN_SCHEMA_ID}' THEN concat('schema id ', {SCHEMA_ID}, "
        f"' is not a Protobuf schema in the schema registry') "
        f"WHEN '{protorecords.OTHER_MESSAGE}' THEN concat('value is a message of schema id ', "
        f"{SCHEMA_ID}, ' other than the one the input reads') "
        f"ELSE concat('value does not decode with schema id ', {SCHEMA_ID}, ' (a truncated or "
        f"corrupt Protobuf payload, or a value its column cannot hold)') END"
    )


def encode_batch(rows: pa.Array, *, writing: protorecords.ProtoWriting) -> pa.Array:
    """One Arrow batch of rows (structs of an output's columns) in the wire format."""
    encoded = [
        None if row is None else protorecords.encode(writing, row)
        for row in rows.to_pylist(maps_as_pydicts="strict")
    ]
    return pa.array(encoded, type=pa.binary())


def encoder(writing: protorecords.ProtoWriting) -> Any:
    """The arrow UDF encoding rows with a registered schema."""

    def encode_rows(rows: pa.Array) -> pa.Array:
        return encode_batch(rows, writing=writing)

    return _ARROW_UDF(encode_rows, BinaryType())


def register_encoders(
    spark: SparkSession, output: runspecs.OutputSpec, encodings: protorecords.ProtoEncodings
) -> None:
    """Register the functions that encode an output's protobuf key and value, under the names
    its record expressions call (records.proto_encoder_name)."""
    for part, writing in (("key", encodings.key), ("value", encodings.value)):
        if writing is not None:
            spark.udf.register(records.proto_encoder_name(output.id, part), encoder(writing))
