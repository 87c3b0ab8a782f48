"""What an App writes: its outputs (to Topics and Tables) and its dead-letter topic.

`apps.AppSpec` assembles them with its inputs and pipeline (`appflows`).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from rillet.api.v1alpha1 import fields, objects, recordschemas, rules

OutputMode = Literal["append", "upsert"]
# How often a Topic output's records reach Kafka across failures (docs/runtime.md, "Delivery").
Delivery = Literal["AtLeastOnce", "ExactlyOnce"]
DELIVERY_DESCRIPTION = (
    "AtLeastOnce (the default): a batch cut off by a failure is written again, so consumers may "
    "see its records twice. ExactlyOnce: each batch is written in Kafka transactions, once; "
    "consumers see each record once if they read with isolation.level=read_committed (Java "
    "clients default to read_uncommitted), at some cost in throughput."
)


class Output(objects.WireModel):
    """Where a result of the pipeline is written: a Topic (records) or a Table (upserts by key)."""

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.exactly_one(
            "topicRef",
            "tableRef",
            message="an output needs exactly one of topicRef or tableRef: keep one",
        ),
        rules.Rule(
            rule="!has(self.tableRef) || !has(self.mode) || self.mode == 'upsert'",
            message="mode of a tableRef output must be upsert (a Table keeps the latest value per "
            "key): remove mode or set it to upsert",
            field_path=".mode",
            check=lambda o: o.table_ref is None or o.mode in {None, "upsert"},
        ),
        rules.Rule(
            rule="(!has(self.tableRef) && (!has(self.mode) || self.mode != 'upsert')) || "
            "(has(self.keyColumns) && self.keyColumns.size() > 0)",
            message="keyColumns is required for tableRef outputs and upsert mode (records are "
            "keyed by them): list the key columns",
            field_path=".keyColumns",
            reason="FieldValueRequired",
            check=lambda o: (o.table_ref is None and o.mode != "upsert") or bool(o.key_columns),
        ),
        rules.Rule(
            rule="!has(self.tableRef) || !has(self.delivery)",
            message="a tableRef output upserts by key, so a batch written twice leaves the Table "
            "the same: remove delivery (it is for topicRef outputs)",
            field_path=".delivery",
            check=lambda o: o.table_ref is None or o.delivery is None,
        ),
        rules.Rule(
            rule="!has(self.tableRef) || (!has(self.keyFormat) && !has(self.valueFormat))",
            message="a tableRef output is encoded as its Table says: remove keyFormat and "
            "valueFormat here and set the Table's keyFormat and valueFormat",
            field_path=".tableRef",
            check=lambda o: (
                o.table_ref is None or (o.key_format is None and o.value_format is None)
            ),
        ),
        *(
            recordschemas.only_for_format(
                f"{part}{kind.title()}",
                format_field=f"{part}Format",
                fmt=kind,
                message=f"{part}{kind.title()} applies only to {part}Format {kind}: remove it, "
                f"or set {part}Format: {kind}",
            )
            for kind in ("avro", "protobuf")
            for part in ("key", "value")
        ),
        rules.Rule(
            rule="!has(self.keyFormat) || self.keyFormat in ['avro', 'json', 'protobuf'] || "
            "(has(self.keyColumns) && self.keyColumns.size() == 1)",
            message="keyFormat string or bytes holds one column: list exactly one keyColumn, or "
            "use keyFormat json, avro or protobuf",
            field_path=".keyFormat",
            check=lambda o: (
                o.key_format in {None, *fields.STRUCTURED_FORMATS} or len(o.key_columns or ()) == 1
            ),
        ),
        rules.Rule(
            rule="!has(self.valueFormat) || self.valueFormat in ['avro', 'json', 'protobuf'] || "
            "(has(self.valueColumns) && self.valueColumns.size() == 1)",
            message="valueFormat string or bytes holds one column: list exactly one "
            "valueColumn, or use valueFormat json, avro or protobuf",
            field_path=".valueFormat",
            check=lambda o: (
                o.value_format in {None, *fields.STRUCTURED_FORMATS}
                or len(o.value_columns or ()) == 1
            ),
        ),
    )

    topic_ref: fields.LocalObjectReference | None = Field(
        default=None,
        description="Write records to the Kafka topic of this Topic object.",
    )
    table_ref: fields.LocalObjectReference | None = Field(
        default=None,
        description="Upsert into this Table, keyed by keyColumns.",
    )
    from_: fields.SqlIdentifier | None = Field(
        default=None,
        alias="from",
        description="Which result to write when the pipeline has several: a view name of the SQL "
        "or a result name of the Python function. Defaults to the single result.",
    )
    key_columns: Annotated[list[fields.ColumnName], Field(max_length=32)] | None = Field(
        default=None,
        description="Columns that form the record key (JSON-encoded when several). Absent: "
        "records have no key. Required for Tables and upsert.",
    )
    value_columns: (
        Annotated[list[fields.ColumnName], Field(min_length=1, max_length=1024)] | None
    ) = Field(
        default=None,
        description="Columns that form the record value (JSON-encoded). Defaults to all columns.",
    )
    mode: OutputMode | None = Field(
        default=None,
        description="append: every result row is a record; upsert: only the latest row per key "
        "counts (aggregations). Defaults to append for Topics, upsert for Tables.",
    )
    key_format: fields.Format | None = Field(
        default=None,
        description="How a topicRef output's record key is written: string (the default for "
        "one key column), bytes (one BINARY column as is), json (always, for several key "
        "columns), avro or protobuf. A tableRef output uses the Table's keyFormat.",
    )
    value_format: fields.Format | None = Field(
        default=None,
        description="How a topicRef output's record value is written: json (the default), "
        "avro or protobuf (Confluent wire format, with the schema registry), or string or "
        "bytes for a single valueColumn. A tableRef output uses the Table's valueFormat.",
    )
    key_avro: recordschemas.AvroSchema | None = Field(
        default=None,
        description="For keyFormat avro: the key's schema (absent: derived from the key "
        "columns) and its subject (absent: <topic>-key).",
    )
    value_avro: recordschemas.AvroSchema | None = Field(
        default=None,
        description="For valueFormat avro: the value's schema (absent: derived from the value "
        "columns) and its subject (absent: <topic>-value).",
    )
    key_protobuf: recordschemas.ProtobufSchema | None = Field(
        default=None,
        description="For keyFormat protobuf: the key's schema and message (absent: derived "
        "from the key columns) and its subject (absent: <topic>-key).",
    )
    value_protobuf: recordschemas.ProtobufSchema | None = Field(
        default=None,
        description="For valueFormat protobuf: the value's schema and message (absent: "
        "derived from the value columns) and its subject (absent: <topic>-value).",
    )
    delivery: Delivery | None = Field(
        default=None, description=f"For topicRef outputs. {DELIVERY_DESCRIPTION}"
    )


class DeadLetter(objects.WireModel):
    """A Kafka topic for records the pipeline fails to process: exactly one of its fields."""

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.exactly_one(
            "topicRef",
            "topicName",
            message="deadLetterTopic needs exactly one of topicRef or topicName: keep one",
        ),
    )

    topic_ref: fields.LocalObjectReference | None = Field(
        default=None, description="A Topic object in the same namespace."
    )
    topic_name: fields.KafkaTopicName | None = Field(
        default=None, description="A Kafka topic that no Topic object manages."
    )
    delivery: Delivery | None = Field(default=None, description=DELIVERY_DESCRIPTION)
