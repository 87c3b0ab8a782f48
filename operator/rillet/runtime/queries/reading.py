"""The App's inputs as DataFrames and temporary views, one per input, named after it.

A topic input is a stream read by Spark's Kafka source. A json input is parsed with its declared
schema, an avro input decoded with its writers' schemas into its reader's (avrorecords, with
the schemas the driver's catalog resolved), a protobuf input as its reader message
(protostages, in Python workers); records that do not parse are split off: with a
dead-letter topic they become the `bad_records` stream, written there by a query of their own;
without one, the first such record stops the App with its coordinates (the API's promise:
"absent: a failure stops the App").
An input with `eventTime` gets Spark's watermark on that column, so the SQL needs none.

A Table input is its latest state: the changelog topic read as a batch up to its latest offsets,
the last record per key kept (by offset within a partition, then by timestamp), tombstones
dropped, values decoded as a topic input's are (an avro or protobuf value of a schema id the
query does not know stops it, to be planned again with the writer's new version, as for a topic
input).
Joined with a stream, Spark plans this static side again at every micro-batch, so each batch
sees the Table as it was when the batch started. That costs a read of the (compacted) Table per
batch: right for small Tables. A topic input's `lookups` join a Table without that read
(lookups.py): the view gains the Table's value of each record's key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (the customary alias)
from pyspark.sql.types import StructType

from rillet.driverapi import runspecs
from rillet.runtime.queries import avrorecords, lookups, options, protorecords, protostages, records


@dataclasses.dataclass(frozen=True)
class Inputs:
    """The views of the pipeline by input name, and the bad records of json, avro and protobuf
    topic inputs."""

    views: dict[str, DataFrame]
    bad_records: dict[str, DataFrame]


def schema_columns(ddl: str) -> list[str]:
    """Column names of a Spark DDL schema (Spark parses it: needs a running session)."""
    schema = StructType.fromDDL(ddl)
    if not isinstance(schema, StructType):
        raise ValueError(f'schema {ddl!r} is not a list of columns (e.g. "a STRING, n BIGINT")')
    return list(schema.fieldNames())


def read_inputs(
    spark: SparkSession,
    spec: runspecs.RunSpec,
    avro: Mapping[str, avrorecords.AvroReading] | None = None,
    protobuf: Mapping[str, protorecords.ProtoReading] | None = None,
) -> Inputs:
    """Every input of the App, registered as a temporary view of its name (`avro`, `protobuf`:
    how each avro or protobuf input is decoded)."""
    views: dict[str, DataFrame] = {}
    bad: dict[str, DataFrame] = {}
    avro, protobuf = avro or {}, protobuf or {}
    for item in spec.inputs:
        if item.kind == "table":
            views[item.name] = read_table(
                spark, spec, item, avro.get(item.name), protobuf.get(item.name)
            )
        else:
            view, bad_records = read_topic(
                spark, spec, item, avro.get(item.name), protobuf.get(item.name)
            )
            # Before the watermark: a Python stage would drop the column's watermark.
            view = lookups.with_lookups(view, spec, item, avro, protobuf)
            views[item.name] = with_event_time(view, item)
            if bad_records is not None:
                bad[item.name] = bad_records
        views[item.name].createOrReplaceTempView(item.name)
    return Inputs(views=views, bad_records=bad)


def read_topic(
    spark: SparkSession,
    spec: runspecs.RunSpec,
    item: runspecs.InputSpec,
    avro: avrorecords.AvroReading | None = None,
    protobuf: protorecords.ProtoReading | None = None,
) -> tuple[DataFrame, DataFrame | None]:
    """A topic input's stream, and the stream of its bad records (json, avro and protobuf,
    with a dead-letter topic)."""
    raw = spark.readStream.format("kafka").options(**options.stream_reader_options(spec, item))
    return parse_records(spec, item, raw.load(), avro, protobuf)


def parse_records(
    spec: runspecs.RunSpec,
    item: runspecs.InputSpec,
    stream: DataFrame,
    avro: avrorecords.AvroReading | None = None,
    protobuf: protorecords.ProtoReading | None = None,
) -> tuple[DataFrame, DataFrame | None]:
    """A topic input's view over Kafka records (the columns of Spark's Kafka source, streamed
    or not), and its bad records (json, avro and protobuf, with a dead-letter topic)."""
    if item.format == "json":
        assert item.value_schema is not None  # runparts requires a schema for json inputs
        parsed = stream.selectExpr(*records.parse_exprs(item.value_schema)).selectExpr(
            "*", records.error_expr()
        )
        return _split_bad_records(spec, parsed, schema_columns(item.value_schema))
    if item.format == "avro":
        if avro is None:
            raise ValueError(f"input {item.name} is avro, and its schemas are not resolved")
        decoded = stream.selectExpr(*avrorecords.decode_exprs(avro)).selectExpr(
            "*", avrorecords.error_expr(avro, input_name=item.name)
        )
        return _split_bad_records(spec, decoded, avro.columns)
    if item.format == "protobuf":
        if protobuf is None:
            raise ValueError(f"input {item.name} is protobuf, and its schemas are not resolved")
        decoded = protostages.decode_stages(stream, protobuf, input_name=item.name)
        return _split_bad_records(spec, decoded, protobuf.columns)
    return stream.selectExpr(*records.view_exprs(item.format)), None


def _split_bad_records(
    spec: runspecs.RunSpec, parsed: DataFrame, columns: list[str]
) -> tuple[DataFrame, DataFrame | None]:
    """The view of a parsed input's good records, and its bad records (to the dead-letter topic;
    without one, the first stops the App)."""
    view_exprs = records.view_exprs("json", schema_columns=columns, source=records.ROW)
    if spec.dead_letter_topic is None:
        return parsed.where(records.fail_on_error_expr(app=spec.app)).selectExpr(*view_exprs), None
    good = parsed.where(f"{records.ERROR} IS NULL").selectExpr(*view_exprs)
    return good, parsed.where(f"{records.ERROR} IS NOT NULL")


def with_event_time(view: DataFrame, item: runspecs.InputSpec) -> DataFrame:
    """The view with Spark's watermark on the input's event-time column, when it has one."""
    if item.event_time is None:
        return view
    column = item.event_time.column
    types = dict(view.dtypes)
    if types.get(column) != "timestamp":
        found = f"is {types[column]}" if column in types else "is not a column"
        raise ValueError(
            f"input {item.name}: eventTime.column {column} {found} of its view: name a TIMESTAMP "
            f"column (the view's columns: {', '.join(f'{c} {t}' for c, t in types.items())})"
        )
    delay = f"{item.event_time.allowed_lateness_ms} milliseconds"
    return view.withWatermark(records.quote(column), delay)


def read_table(
    spark: SparkSession,
    spec: runspecs.RunSpec,
    item: runspecs.InputSpec,
    avro: avrorecords.AvroReading | None = None,
    protobuf: protorecords.ProtoReading | None = None,
) -> DataFrame:
    """A Table's latest value per key, as the columns of its value format (`avro`, `protobuf`:
    how an avro or protobuf Table's values are decoded)."""
    raw = spark.read.format("kafka").options(**options.table_reader_options(spec, item)).load()
    in_partition = raw.groupBy("key", "partition").agg(
        F.max_by(F.struct("value", "timestamp", "offset"), "offset").alias("r")
    )
    latest = (
        in_partition.groupBy("key")
        .agg(
            F.max_by(
                F.struct("r.value", "r.timestamp", "partition", "r.offset"),
                F.struct("r.timestamp", "partition"),
            ).alias("r")
        )
        .select("key", "r.*")
        .where("value IS NOT NULL")
    )
    if item.format == "json":
        assert item.value_schema is not None  # runparts requires a schema for json Tables
        columns = schema_columns(item.value_schema)
        parsed = latest.selectExpr(
            "key",
            "value",
            *records.METADATA_COLUMNS,
            f"from_json(CAST(value AS STRING), {records.sql_string(item.value_schema)}) "
            f"AS {records.ROW}",
        )
        view = parsed.selectExpr(
            *records.view_exprs("json", schema_columns=columns, source=records.ROW)
        )
    elif item.format == "avro":
        if avro is None:
            raise ValueError(f"input {item.name} is avro, and its schemas are not resolved")
        decoded = latest.selectExpr(
            "key",
            *records.METADATA_COLUMNS,
            f"{avrorecords.decode_value_expr('value', avro, input_name=item.name)} "
            f"AS {records.ROW}",
        )
        view = decoded.selectExpr(
            *records.view_exprs("avro", schema_columns=avro.columns, source=records.ROW)
        )
    elif item.format == "protobuf":
        if protobuf is None:
            raise ValueError(f"input {item.name} is protobuf, and its schemas are not resolved")
        row = protostages.decoded_row(F.col("value"), protobuf, input_name=item.name)
        decoded = latest.select("key", *records.METADATA_COLUMNS, row.alias(records.ROW))
        view = decoded.selectExpr(
            *records.view_exprs("protobuf", schema_columns=protobuf.columns, source=records.ROW)
        )
    else:
        view = latest.selectExpr(*records.view_exprs(item.format))
    return F.broadcast(view) if item.broadcast else view
