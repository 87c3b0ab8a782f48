"""The Table kind: keyed state of an App, kept in a compacted Kafka changelog topic.

An App writes a Table with an upsert output (latest value per key) and reads it back, in the
same or another App, as a lookup input (stream-table joins). A windowed Table keeps one value per
key and window; a global Table is read in full by every executor instead of partition by
partition. Like a Topic, the changelog topic's partitions only grow and its name never changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal

from pydantic import Field

from rillet.api.v1alpha1 import fields, objects, recordschemas, rules, topicconfigs, topics

WindowType = Literal["tumbling", "hopping"]

COMPACTING_POLICIES = ("compact", "compact,delete", "delete,compact")


def _keeps_compaction(config: Mapping[str, int | str]) -> bool:
    return config.get("cleanup.policy") != "delete"


KEEPS_COMPACTION = rules.Rule(
    rule="!('cleanup.policy' in self) || type(self['cleanup.policy']) != string || "
    "self['cleanup.policy'] != 'delete'",
    message="config cleanup.policy of a Table must keep compaction (compact or compact,delete): "
    "a Table is a compacted changelog; use compact,delete with retention.ms to expire keys",
    check=_keeps_compaction,
)
WINDOW_IMMUTABLE = rules.Rule(
    rule="self == oldSelf",
    message="window cannot change after creation (the changelog is keyed by window): create a "
    "new Table",
)
WINDOW_FIXED_PRESENCE = rules.Rule(
    rule="has(self.window) == has(oldSelf.window)",
    message="window cannot be added or removed after creation (the changelog is keyed by "
    "window): create a new Table",
    field_path=".window",
)
VALUE_AVRO_ONLY_FOR_AVRO = rules.Rule(
    rule="!has(self.valueAvro) || self.valueFormat == 'avro'",
    message="valueAvro applies only when valueFormat is avro: remove it, or set valueFormat: avro",
    field_path=".valueAvro",
    check=lambda spec: spec.value_avro is None or spec.value_format == "avro",
)
VALUE_PROTOBUF_ONLY_FOR_PROTOBUF = rules.Rule(
    rule="!has(self.valueProtobuf) || self.valueFormat == 'protobuf'",
    message="valueProtobuf applies only when valueFormat is protobuf: remove it, or set "
    "valueFormat: protobuf",
    field_path=".valueProtobuf",
    check=lambda spec: spec.value_protobuf is None or spec.value_format == "protobuf",
)
PARTITIONS_KEPT = rules.Rule(
    rule="!has(oldSelf.partitions) || has(self.partitions)",
    message="partitions cannot be removed once set (that could shrink the topic): keep the "
    "field, at a value at least the current one",
    field_path=".partitions",
)


def _schema_rule(prefix: str) -> rules.Rule:
    """A rule: `<prefix>Schema` is only for the json `<prefix>Format`."""
    fmt, schema = f"{prefix}Format", f"{prefix}Schema"
    return rules.Rule(
        rule=f"!has(self.{schema}) || self.{fmt} == 'json'",
        message=f"{schema} applies only when {fmt} is json: remove it, or set {fmt}: json",
        field_path=f".{schema}",
        check=lambda spec: (
            getattr(spec, f"{prefix}_schema") is None or getattr(spec, f"{prefix}_format") == "json"
        ),
    )


class Window(objects.WireModel):
    """How the Table's keys are split into time windows (event time of the records)."""

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.Rule(
            rule="self.type == 'hopping' ? has(self.step) : !has(self.step)",
            message="window.step is required for hopping windows and not allowed for tumbling "
            "windows: add it, or change window.type",
            check=lambda window: (window.type == "hopping") == (window.step is not None),
        ),
        rules.Rule(
            rule="!has(self.step) || !("
            f"{fields.cel_durations_parse('self.step', 'self.size')}) || "
            "duration(self.step) <= duration(self.size)",
            message="window.step must not be longer than window.size (a hopping window starts "
            "every step and lasts size): shorten step or lengthen size",
            field_path=".step",
            check=lambda window: (
                window.step is None
                or fields.parse_duration(window.step) <= fields.parse_duration(window.size)
            ),
        ),
        rules.Rule(
            rule="!has(self.expiry) || !("
            f"{fields.cel_durations_parse('self.expiry', 'self.size')}) || "
            "duration(self.expiry) >= duration(self.size)",
            message="window.expiry must not be shorter than window.size (a window would expire "
            "before it closes): lengthen expiry",
            field_path=".expiry",
            check=lambda window: (
                window.expiry is None
                or fields.parse_duration(window.expiry) >= fields.parse_duration(window.size)
            ),
        ),
    )

    type: WindowType = Field(
        description="tumbling: fixed, non-overlapping windows of size; hopping: windows of size "
        "starting every step (they overlap when step < size).",
    )
    size: Annotated[fields.Duration, fields.positive_duration("window.size")] = Field(
        description="Length of a window, e.g. 5m or 1h (units ms, s, m, h).",
    )
    step: Annotated[fields.Duration, fields.positive_duration("window.step")] | None = Field(
        default=None,
        description="Hopping windows only: time between the starts of two windows, at most size.",
    )
    expiry: fields.Duration | None = Field(
        default=None,
        description="How long a window is kept after it starts, accepting late records and "
        "answering lookups; at least size. Defaults to the larger of 24h and size plus the "
        "longest allowedLateness of the writing App's inputs (how long a window stays open).",
    )


class TableServing(objects.WireModel):
    """A server the operator runs for the Table: it keeps the Table in a local store, read from
    its topic, and answers `GET /tables/<name>/<key>` over HTTP in milliseconds."""

    replicas: Annotated[int, Field(ge=1, le=20)] = Field(
        default=1,
        description="Server pods; each holds the whole Table and answers any key, so more "
        "replicas add lookup throughput and availability, not capacity.",
    )
    cpu: fields.CpuQuantity = Field(default="250m", description="CPU request of each server pod.")
    memory: fields.MemoryQuantity = Field(
        default="256Mi",
        description="Memory of each server pod (SQLite pages its store from disk: the Table "
        "need not fit in memory).",
    )
    storage: fields.MemoryQuantity = Field(
        default="1Gi",
        description="Local disk of each server pod for its store (an emptyDir size limit); "
        "about 100 bytes per key beyond the keys and values themselves.",
    )
    network_policy: bool = Field(
        default=True,
        description="A NetworkPolicy that admits lookups only from pods of the Table's "
        "namespace and the operator, and metrics scrapes only from the monitoring namespaces "
        "the operator names (enforced by CNI plugins that implement NetworkPolicy); false "
        "leaves the server's ports open to the network, lookups still authorized by RBAC.",
    )


class TableSpec(objects.WireModel):
    """The Table's changelog topic, record formats and windowing."""

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        topics.TOPIC_NAME_FIXED_PRESENCE,
        PARTITIONS_KEPT,
        WINDOW_FIXED_PRESENCE,
        _schema_rule("key"),
        _schema_rule("value"),
        VALUE_AVRO_ONLY_FOR_AVRO,
        VALUE_PROTOBUF_ONLY_FOR_PROTOBUF,
    )

    topic_name: Annotated[fields.KafkaTopicName, topics.TOPIC_NAME_IMMUTABLE] | None = Field(
        default=None,
        description="Name of the changelog topic in Kafka. Defaults to metadata.name. Cannot "
        "change, and cannot be added or removed, after creation.",
    )
    partitions: Annotated[fields.Partitions, topics.PARTITIONS_GROW_ONLY] | None = Field(
        default=None,
        description="Partitions of the changelog topic. Defaults to the partition count of the "
        "App that writes the Table (co-partitioning). Can grow, never shrink.",
    )
    replication_factor: (
        Annotated[
            int, Field(ge=1, le=topics.MAX_REPLICATION_FACTOR), topics.REPLICATION_FACTOR_IMMUTABLE
        ]
        | None
    ) = Field(
        default=None,
        description="Copies of each partition of the changelog topic. Defaults to the broker's "
        "default.replication.factor. Cannot change once set.",
    )
    key_format: fields.TableFormat = Field(
        default="string",
        description="How record keys are encoded: json, string or bytes.",
    )
    key_schema: fields.DdlSchema | None = Field(
        default=None,
        description="For keyFormat json: the key's columns as a Spark DDL string, e.g. "
        '"user STRING, page STRING". Defaults to the writer\'s key columns.',
    )
    value_format: fields.TableValueFormat = Field(
        default="json",
        description="How record values are encoded: json, string, bytes, avro or protobuf "
        "(Confluent wire format, with the schema registry; `rillet table get` and Table "
        "servers print avro and protobuf values as JSON).",
    )
    value_schema: fields.DdlSchema | None = Field(
        default=None,
        description="For valueFormat json: the value's columns as a Spark DDL string, e.g. "
        '"word STRING, count BIGINT". Defaults to the writer\'s value columns.',
    )
    value_avro: recordschemas.AvroSchema | None = Field(
        default=None,
        description="For valueFormat avro: the schema the writing App encodes with and readers "
        "read into, inline or from the registry. Absent: a schema derived from the writer's "
        "value columns, registered under <topic>-value; readers take its latest version.",
    )
    value_protobuf: recordschemas.ProtobufSchema | None = Field(
        default=None,
        description="For valueFormat protobuf: the schema and message the writing App encodes "
        "with and readers read as, inline or from the registry. Absent: a message derived from "
        "the writer's value columns, registered under <topic>-value; readers take the first "
        "message of its latest version.",
    )
    window: Annotated[Window, WINDOW_IMMUTABLE] | None = Field(
        default=None,
        description="Window the keys by event time. Absent: one value per key. Cannot change, "
        "be added or be removed after creation.",
    )
    global_: bool = Field(
        default=False,
        alias="global",
        description="Read the whole Table on every executor (small lookup tables joined with "
        "any stream), instead of co-partitioned reads.",
    )
    config: Annotated[topicconfigs.TopicConfig, KEEPS_COMPACTION] | None = Field(
        default=None,
        description=f"{topicconfigs.CONFIG_DESCRIPTION} Rillet sets cleanup.policy to compact "
        "(compact,delete for windowed Tables); it may not be plain delete.",
    )
    deletion_policy: fields.DeletionPolicy = Field(
        default="Retain",
        description=fields.DELETION_POLICY_DESCRIPTION,
    )
    config_policy: fields.ConfigPolicy | None = Field(
        default=None,
        description=fields.CONFIG_POLICY_DESCRIPTION,
    )
    serve: TableServing | None = Field(
        default=None,
        description="Run a server for key lookups over HTTP (see docs/tables.md). Absent: the "
        "Table is read by scanning its topic (`rillet table get`).",
    )


class TableServerStatus(objects.WireModel):
    """Where the Table's server answers."""

    service: str = Field(description="The server's Service, in the Table's namespace.")
    url: str = Field(description="Lookups in the cluster: <url>/<key>.")


class TableStatus(topics.TopicStatus):
    """The changelog topic as last observed in Kafka, and who writes the Table."""

    windowed: bool | None = Field(default=None, description="Whether the Table is windowed.")
    writers: list[str] | None = Field(
        default=None,
        description="Names of the Apps that write this Table (normally one).",
    )
    server: TableServerStatus | None = Field(
        default=None, description="The Table's server, while spec.serve is set."
    )


class Table(objects.Resource):
    """Keyed, optionally windowed state in a compacted Kafka changelog topic."""

    kind_info: ClassVar[objects.KindInfo] = objects.KindInfo(
        kind="Table",
        plural="tables",
        singular="table",
        short_names=("rtbl",),
        printer_columns=(
            objects.PrinterColumn(
                name="Topic",
                type="string",
                json_path=".status.topicName",
                description="Name of the changelog topic in Kafka.",
            ),
            topics.PARTITIONS_COLUMN,
            objects.PrinterColumn(
                name="Window",
                type="string",
                json_path=".spec.window.type",
                description="Window type, if windowed.",
            ),
            objects.READY_COLUMN,
            objects.AGE_COLUMN,
        ),
    )
    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (topics.DEFAULT_NAME_FITS,)

    kind: Literal["Table"] = Field(default="Table", description="The kind: Table.")
    spec: TableSpec = Field(
        default_factory=TableSpec,
        description="The desired Table.",
        json_schema_extra={"default": {}},
    )
    status: TableStatus | None = Field(default=None, description="The observed Table.")
