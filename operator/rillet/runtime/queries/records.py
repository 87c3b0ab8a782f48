"""Kafka records to rows and rows to records, as Spark SQL expressions (pure).

Reading: a topic input becomes a view whose columns depend on its format (`appflows.Input`): json
gives the columns of its schema, string and bytes give `key` and `value`; every view also has
`timestamp`, `partition` and `offset` (a schema column of the same name wins). A json value that
does not parse, or does not fit the schema, is a bad record: it gets an error kind
(`malformed-json` or `schema-mismatch`) and goes to the dead-letter topic with its reason and
source coordinates in headers, its key and value untouched (so it can be replayed).

Writing: a result row becomes a record whose key is its key columns (a single column as is,
several JSON-encoded) and whose value is its value columns as JSON, or in Avro with the
output's registered schema (`AvroWriting`; reading Avro is avrorecords.py's), or in Protobuf by
a function of the session (`proto_encoder_name`; protostages registers it). For a Table, a
row whose non-key value columns are all NULL is a tombstone (NULL value: the key is removed).

Every function here builds strings; nothing touches Spark, so all of it is unit-tested.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Sequence

from rillet.api.v1alpha1 import fields
from rillet.driverapi import runspecs

INTERNAL_PREFIX = "__rillet_"
ROW = "__rillet_row"
CORRUPT = "__rillet_corrupt"
ERROR = "__rillet_error"
METADATA_COLUMNS = ("timestamp", "partition", "offset")
# Columns of Spark's Kafka source that the parsing stage keeps.
RAW_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")
MALFORMED_JSON = "malformed-json"
SCHEMA_MISMATCH = "schema-mismatch"
WINDOW_COLUMNS = ("window", "window_start")
_JSON_OPTIONS = "map('ignoreNullFields', 'false')"


def quote(name: str) -> str:
    """A column name as a quoted Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    """`text` as a Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# Reading ------------------------------------------------------------------------------------


def computed_once(expr: str) -> str:
    """`expr` (a value's decoding) as a column Spark computes once per record, however many
    expressions read it.

    Spark's optimizer would otherwise copy the decoding into every reader: it pushes the
    bad-record filter, and any filter of the App's SQL, below the projection that decodes,
    putting the decoding in the filter in place of the column (PushPredicateThroughNonJoin,
    for a Project whose fields are all deterministic), and merges a projection that reads the
    column once into it (CollapseProject, for a deterministic producer): from_json or
    from_avro then ran 2 to 4 times per record. Both rules leave a nondeterministic expression
    where it is (Spark 4.x's Optimizer.scala: `fields.forall(_.deterministic)`, SPARK-13473;
    `producer.deterministic` in CollapseProject.canCollapseExpressions), whatever
    spark.sql.optimizer.collapseProjectAlwaysInline says. spark_partition_id() is
    nondeterministic to Spark, never NULL nor negative, and costs a field read, so this CASE
    always yields `expr`. (Dataset.observe would also stop both rules, but adds a metric per
    input to every query's progress and a node that splits whole-stage code generation.)
    """
    return f"CASE WHEN spark_partition_id() >= 0 THEN {expr} END"


def parse_exprs(value_schema: str) -> list[str]:
    """Stage 1 of a json input: the raw columns and the parsed value, parsed once per record
    (computed_once)."""
    ddl = f"{value_schema}, {CORRUPT} STRING"
    parsed = (
        f"from_json(CAST(value AS STRING), {sql_string(ddl)}, "
        f"map('mode', 'PERMISSIVE', 'columnNameOfCorruptRecord', '{CORRUPT}'))"
    )
    return [*RAW_COLUMNS, f"{computed_once(parsed)} AS {ROW}"]


def error_expr() -> str:
    """Stage 2 of a json input: why a record is bad, or NULL (a NULL value is a tombstone)."""
    return (
        f"CASE WHEN value IS NULL OR {ROW}.{CORRUPT} IS NULL THEN NULL "
        f"WHEN try_parse_json(CAST(value AS STRING)) IS NULL THEN '{MALFORMED_JSON}' "
        f"ELSE '{SCHEMA_MISMATCH}' END AS {ERROR}"
    )


def reason_expr(value_schema: str) -> str:
    """A sentence for the error kind of a bad record."""
    return (
        f"CASE {ERROR} WHEN '{MALFORMED_JSON}' THEN 'value is not valid JSON' "
        f"ELSE {sql_string(f'value does not match the schema: {value_schema}')} END"
    )


def fail_on_error_expr(*, app: str) -> str:
    """A filter that stops the query at a bad record (for Apps without a dead-letter topic)."""
    advice = f" (App {app} has no deadLetterTopic to route bad records to)"
    return (
        f"CASE WHEN {ERROR} IS NULL THEN TRUE ELSE raise_error(concat('bad record in topic ', "
        f"topic, ' partition ', partition, ' offset ', offset, ': ', {ERROR}, "
        f"{sql_string(advice)})) END"
    )


def view_exprs(
    fmt: fields.Format, *, schema_columns: Sequence[str] = (), source: str = ""
) -> list[str]:
    """The columns of an input view, from the parsed stage (json, avro) or the raw record.

    `source` prefixes the json or avro columns (the decoded struct); metadata columns come from
    the record unless the schema has a column of the same name.
    """
    metadata = [quote(c) for c in METADATA_COLUMNS if c not in schema_columns]
    if fmt in fields.STRUCTURED_FORMATS:
        prefix = f"{source}." if source else ""
        return [f"{prefix}{quote(c)} AS {quote(c)}" for c in schema_columns] + metadata
    if fmt == "string":
        return ["CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", *metadata]
    return ["key", "value", *metadata]


def lookup_key_expr(columns: Sequence[str], key_format: fields.Format, *, what: str) -> str:
    """The Table key a lookup's columns make, as BINARY: the bytes its writer keys records by
    (an output's key encoding, `_encode`), so that equal keys compare equal as bytes."""
    return f"CAST({_encode(columns, key_format, what=what)} AS BINARY)"


def lookup_value_expr(column: str, fmt: fields.Format, value_schema: str | None) -> str:
    """A looked-up value (BINARY, NULL when absent) as the Table input's view shows values: the
    struct of its json columns, or the value itself."""
    if fmt == "json":
        assert value_schema is not None  # runparts requires a schema for json Tables
        return f"from_json(CAST({quote(column)} AS STRING), {sql_string(value_schema)})"
    if fmt == "string":
        return f"CAST({quote(column)} AS STRING)"
    return quote(column)


def dead_letter_exprs(*, app: str, reason: str) -> list[str]:
    """The record written to the dead-letter topic: the original key and value, and headers
    (`reason`: the sentence of its error kind, as reason_expr gives it)."""
    headers = {
        "rillet.error.kind": ERROR,
        "rillet.error.reason": reason,
        "rillet.app": sql_string(app),
        "rillet.source.topic": "topic",
        "rillet.source.partition": "partition",
        "rillet.source.offset": "offset",
        "rillet.source.timestamp": "unix_millis(timestamp)",
    }
    entries = ", ".join(
        f"named_struct('key', {sql_string(name)}, 'value', CAST(CAST({expr} AS STRING) AS BINARY))"
        for name, expr in headers.items()
    )
    return ["key", "value", f"array({entries}) AS headers"]


# Writing ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AvroWriting:
    """The registered schema an output's key or value is encoded with, and its id."""

    schema_id: int
    schema: str


@dataclasses.dataclass(frozen=True)
class AvroEncodings:
    """The Avro schemas of an output, for its avro key and value."""

    key: AvroWriting | None = None
    value: AvroWriting | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class RecordExprs:
    """How one output turns result rows into Kafka records."""

    key: str | None
    value: str
    key_columns: tuple[str, ...]
    value_columns: tuple[str, ...]

    def select(self) -> list[str]:
        """The columns Spark's Kafka sink expects."""
        key = [f"{self.key} AS key"] if self.key else []
        return [*key, f"{self.value} AS value"]


def key_columns_of(output: runspecs.OutputSpec, columns: Sequence[str]) -> tuple[str, ...]:
    """The key columns, with the window added for a windowed Table that does not list it."""
    keys = output.key_columns
    if output.window is None or any(c in keys for c in WINDOW_COLUMNS):
        return keys
    if "window" in columns:
        return (*keys, "window")
    raise ValueError(
        f"output {output.id}: the Table is windowed, so its key needs the window: add "
        f"window_start (or window) to keyColumns, or select the window column"
    )


def record_columns(
    output: runspecs.OutputSpec, columns: Sequence[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The key and value columns of an output over a result with `columns`.

    Raises ValueError naming a missing column.
    """
    visible = [c for c in columns if not c.startswith(INTERNAL_PREFIX)]
    keys = key_columns_of(output, visible)
    values = output.value_columns or tuple(visible)
    missing = [c for c in (*keys, *values) if c not in visible]
    if missing:
        raise ValueError(
            f"output {output.id}: no column {', '.join(dict.fromkeys(missing))} in the result "
            f"(its columns: {', '.join(visible)})"
        )
    return keys, tuple(values)


@dataclasses.dataclass(frozen=True)
class ProtoEncoded:
    """Which parts of an output are encoded by Protobuf functions in the session (named by
    proto_encoder_name; protostages registers them with their schemas)."""

    key: bool = False
    value: bool = False


def proto_encoder_name(output_id: str, part: str) -> str:
    """The session function encoding an output's protobuf key or value: a SQL identifier,
    with a digest of the id (ids that differ only in punctuation stay apart)."""
    digest = hashlib.sha256(output_id.encode()).hexdigest()[:8]
    return f"{INTERNAL_PREFIX}protobuf_{re.sub(r'[^A-Za-z0-9]', '_', output_id)}_{digest}_{part}"


def build_record_exprs(
    output: runspecs.OutputSpec,
    columns: Sequence[str],
    avro: AvroEncodings | None = None,
    protobuf: ProtoEncoded | None = None,
) -> RecordExprs:
    """Key and value expressions of an output over a result with `columns`.

    Raises ValueError naming what does not fit (a missing column, several columns for a string
    or bytes value, an avro key or value without its schema in `avro`, a protobuf one without
    its encoder in `protobuf`).
    """
    keys, values = record_columns(output, columns)
    avro, protobuf = avro or AvroEncodings(), protobuf or ProtoEncoded()
    what = f"output {output.id}"
    value = _encode(
        values,
        output.value_format,
        what=f"{what}: value",
        avro=avro.value,
        protobuf=proto_encoder_name(output.id, "value") if protobuf.value else None,
    )
    if output.kind == "table":
        value = _with_tombstone(value, [c for c in values if c not in keys])
    key = None
    if keys:
        key = _encode(
            keys,
            output.key_format,
            what=f"{what}: key",
            avro=avro.key,
            protobuf=proto_encoder_name(output.id, "key") if protobuf.key else None,
        )
    return RecordExprs(key=key, value=value, key_columns=keys, value_columns=values)


def _encode(
    columns: Sequence[str],
    fmt: fields.Format,
    *,
    what: str,
    avro: AvroWriting | None = None,
    protobuf: str | None = None,
) -> str:
    if fmt == "protobuf":
        if protobuf is None:
            raise ValueError(f"{what} is protobuf, and its schema is not resolved")
        return f"{protobuf}(struct({', '.join(quote(c) for c in columns)}))"
    if fmt == "avro":
        if avro is None:
            raise ValueError(f"{what} is avro, and its schema is not resolved")
        header = f"X'00{avro.schema_id:08X}'"
        struct = ", ".join(quote(c) for c in columns)
        return f"concat({header}, to_avro(struct({struct}), {sql_string(avro.schema)}))"
    if fmt == "json":
        return f"to_json(struct({', '.join(quote(c) for c in columns)}), {_JSON_OPTIONS})"
    if len(columns) != 1:
        raise ValueError(
            f"{what} is {fmt}, which holds one column, not {len(columns)}: "
            f"name one column, or use json"
        )
    target = "STRING" if fmt == "string" else "BINARY"
    return f"CAST({quote(columns[0])} AS {target})"


def _with_tombstone(value: str, non_key: Sequence[str]) -> str:
    if not non_key:
        return value
    all_null = " AND ".join(f"{quote(c)} IS NULL" for c in non_key)
    return f"CASE WHEN {all_null} THEN NULL ELSE {value} END"


def has_key_expr(keys: Sequence[str]) -> str:
    """True for rows with at least one non-NULL key column (a Table cannot hold the others)."""
    return " OR ".join(f"{quote(c)} IS NOT NULL" for c in keys) or "TRUE"
