"""What an App reads and computes: its inputs and pipeline.

`apps.AppSpec` assembles them with what it writes (`appoutputs`: outputs, dead-letter topic) and
the parts in `appresources` (scaling, pods, checkpoint, trigger).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from rillet.api.v1alpha1 import fields, objects, recordschemas, rules

PYTHON_ENTRYPOINT_PATTERN = (
    r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
)

StartingOffsets = Literal["earliest", "latest"]


class ExternalTopic(objects.WireModel):
    """A Kafka topic that no Topic object manages (it must already exist)."""

    topic_name: fields.KafkaTopicName = Field(description="Name of the topic in Kafka.")


class EventTime(objects.WireModel):
    """Which column holds an input's event time, and how late its records may still count.

    The runtime sets Spark's watermark on the input from it: the latest event time seen, less
    allowedLateness. Stateful operators (windows, aggregations, stream-stream joins) drop
    records older than the watermark and count them in rillet_late_rows_dropped_total; a window
    is final, and its state freed, once the watermark passes its end.
    """

    column: fields.ColumnName = Field(
        default="timestamp",
        description="A TIMESTAMP column of the input's view: a column of its schema, or "
        "timestamp (the time of the Kafka record, the default).",
    )
    allowed_lateness: fields.Duration = Field(
        description="How far behind the latest event time seen a record may be and still "
        "count, e.g. 30s or 5m (0s: no late records).",
    )


class Lookup(objects.WireModel):
    """A Table each record of a topic input looks up by key, as a left join kept up to date.

    The input's view gains a column named after the Table's input: a struct of the Table's value
    columns (its value, for string and bytes Tables), NULL when the Table holds no such key. Each
    executor keeps the Table in a local store and reads only its changes before each batch, so a
    batch costs what its records cost, however large the Table is; a batch sees every update of
    the Table written before it started (docs/tables.md, "Lookups").
    """

    table: fields.SqlIdentifier = Field(
        description="The name of a tableRef input of this App: the Table looked up, and the "
        "name of the view's new column. The Table may not be windowed.",
    )
    # Not `on`: YAML 1.1 (PyYAML, kubectl's parser) reads an unquoted `on:` key as true.
    key_columns: Annotated[list[fields.ColumnName], Field(min_length=1, max_length=32)] = Field(
        description="Columns of this input that hold the Table's key, named as its key columns "
        "and in their order (like SQL's JOIN ... USING): one column for a string or bytes key.",
    )


class Input(objects.WireModel):
    """A Kafka topic or Table the pipeline reads, exposed to it as a view named `name`.

    The view's columns depend on format: json gives the columns of `schema`; avro the fields of
    its reader schema (`avro`); protobuf the fields of its reader message (`protobuf`); string
    gives `key` and `value` (STRING); bytes gives `key` and `value` (BINARY). Every view also
    has `timestamp`, `partition` and `offset`.
    """

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.exactly_one(
            "topicRef",
            "tableRef",
            "external",
            message="an input needs exactly one of topicRef, tableRef or external: keep one",
        ),
        rules.Rule(
            rule="has(self.tableRef) || (has(self.format) && self.format != 'json') || "
            "has(self.schema)",
            message="schema is required for json topic inputs (format json is the default): "
            'give the columns as a Spark DDL string, e.g. "word STRING, n BIGINT"',
            field_path=".schema",
            reason="FieldValueRequired",
            check=lambda i: (
                i.table_ref is not None
                or (i.format is not None and i.format != "json")
                or i.schema_ is not None
            ),
        ),
        rules.Rule(
            rule="!has(self.schema) || !has(self.format) || self.format == 'json'",
            message="schema applies only to json inputs: remove it, or set format: json",
            field_path=".schema",
            check=lambda i: i.schema_ is None or i.format in {None, "json"},
        ),
        recordschemas.only_for_format(
            "avro",
            format_field="format",
            fmt="avro",
            message="avro applies only to avro inputs: remove it, or set format: avro",
        ),
        recordschemas.only_for_format(
            "protobuf",
            format_field="format",
            fmt="protobuf",
            message="protobuf applies only to protobuf inputs: remove it, or set format: protobuf",
        ),
        rules.Rule(
            rule="!has(self.tableRef) || (!has(self.eventTime) && !has(self.maxOffsetsPerTrigger))",
            message="eventTime and maxOffsetsPerTrigger apply to topic inputs (a tableRef input "
            "is read whole, as the Table's latest values): remove them from this input",
            field_path=".tableRef",
            check=lambda i: (
                i.table_ref is None or (i.event_time is None and i.max_offsets_per_trigger is None)
            ),
        ),
        rules.Rule(
            rule="!has(self.tableRef) || !has(self.lookups)",
            message="lookups apply to topic inputs (the records that look a Table up): move them "
            "to the topic input whose records hold the key",
            field_path=".lookups",
            check=lambda i: i.table_ref is None or i.lookups is None,
        ),
    )

    name: fields.SqlIdentifier = Field(
        description="Name of the view the pipeline reads this input from (a SQL identifier, "
        "unique among the inputs).",
    )
    topic_ref: fields.LocalObjectReference | None = Field(
        default=None,
        description="Read the Kafka topic of this Topic object.",
    )
    table_ref: fields.LocalObjectReference | None = Field(
        default=None,
        description="Read this Table (its latest value per key) for lookups and joins.",
    )
    external: ExternalTopic | None = Field(
        default=None,
        description="Read a Kafka topic that no Topic object manages.",
    )
    format: fields.Format | None = Field(
        default=None,
        description="How record values are encoded: json, avro or protobuf (Confluent wire "
        "format, with the schema registry), string or bytes. Defaults to json, or to the "
        "Table's valueFormat for a tableRef.",
    )
    schema_: fields.DdlSchema | None = Field(
        default=None,
        alias="schema",
        description="For json: the value's columns as a Spark DDL string, e.g. \"user STRING, "
        "ts TIMESTAMP\". Required for json topics; a Table's valueSchema otherwise.",
    )
    avro: recordschemas.AvroSchema | None = Field(
        default=None,
        description="For avro: the reader's schema, inline or from the registry. Absent: the "
        "latest version of <topic>-value when the App starts.",
    )
    protobuf: recordschemas.ProtobufSchema | None = Field(
        default=None,
        description="For protobuf: the reader's schema and message, inline or from the "
        "registry. Absent: a Table's valueProtobuf, else the first message of the latest "
        "version of <topic>-value when the App starts.",
    )
    starting_offsets: StartingOffsets = Field(
        default="latest",
        description="Where a new App starts reading: earliest or latest. Ignored once the "
        "checkpoint holds offsets.",
    )
    event_time: EventTime | None = Field(
        default=None,
        description="The input's event-time column and allowed lateness: the runtime sets the "
        "watermark from them, so the pipeline's SQL needs none.",
    )
    max_offsets_per_trigger: Annotated[int, Field(ge=1, le=fields.INT64_SCHEMA_MAX)] | None = Field(
        default=None,
        description="Most records a micro-batch reads from this input, spread over its "
        "partitions by lag: a backlog is worked off in batches of this size (steady "
        "latency, work for executors added meanwhile) instead of one batch of it all. "
        "Absent: all that is available.",
    )
    lookups: Annotated[list[Lookup], Field(min_length=1, max_length=8)] | None = Field(
        default=None,
        description="Tables each record of this topic input looks up by key: a left join that "
        "costs no rescan of the Table per batch (a JOIN in the SQL does: docs/tables.md).",
    )


class PythonPipeline(objects.WireModel):
    """A pipeline written as a Python function shipped in the App's image."""

    entrypoint: Annotated[str, Field(max_length=512, pattern=PYTHON_ENTRYPOINT_PATTERN)] = Field(
        description='The function as "module:function", e.g. "clicks.pipeline:build". It is '
        "called with the SparkSession and a dict of the input views by name, and "
        "returns a DataFrame, or a dict of DataFrames by result name.",
    )


class Pipeline(objects.WireModel):
    """What the App computes: exactly one of sql or python."""

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.exactly_one(
            "sql",
            "python",
            message="pipeline needs exactly one of sql or python: keep one",
        ),
    )

    sql: Annotated[str, Field(min_length=1, max_length=262144)] | None = Field(
        default=None,
        description="Spark SQL over the input views. Several statements may create temporary "
        "views; the last statement is the result, and outputs[].from can name views.",
    )
    python: PythonPipeline | None = Field(
        default=None,
        description="A Python function from the App's image.",
    )
