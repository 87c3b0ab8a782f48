"""Avro records in the Confluent wire format to rows and back, as Spark SQL expressions (pure).

A record's value is a zero byte, the 4-byte big-endian id of its writer's schema in the
registry, then the Avro payload. Reading, each record is decoded with its writer's schema and
resolved into the input's reader schema (spark-avro's `from_avro` with option `avroSchema`), so
every version of a subject reads as one set of columns; a query holds one decoder per writer
schema known when it was planned (`AvroReading.writers`).

A record of an id the query does not know stops it with `UNKNOWN_ID_MARKER` and the id: the
driver asks the registry (runtime.driver.schemacatalog), and plans the query again, with the
writer's schema when the registry has it, or with the id among the unknown ones when it does
not; the stopped batch runs again from the checkpoint, so nothing is lost or read twice.

Bad records (to the dead-letter topic, as malformed JSON): not in the wire format
(`not-confluent-avro`), of an id the registry does not have (`unknown-schema-id`), or a payload
that does not decode with its writer's schema (`corrupt-avro`, told by the reader's marker
field: avroschemas.DECODED_MARKER).
Writing is records.py's (`AvroWriting`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from rillet.runtime.queries import avroschemas, records

SCHEMA_ID = "__rillet_schema_id"
NOT_CONFLUENT_AVRO = "not-confluent-avro"
UNKNOWN_SCHEMA_ID = "unknown-schema-id"
CORRUPT_AVRO = "corrupt-avro"
UNKNOWN_ID_MARKER = "rillet: a record of a schema id the query does not know"
_UNKNOWN_ID = re.compile(re.escape(UNKNOWN_ID_MARKER) + r": input (\w+) schema id (\d+)")
# Header: the magic byte and the schema id; the payload starts at byte 6 (1-based).
_HEADER_BYTES = 5
# No registry hands out a negative id: the decoder of this branch types the CASE, never runs.
_NO_ID = -1


@dataclasses.dataclass(frozen=True)
class AvroReading:
    """What a query decodes an Avro input with: the reader's schema, the writers' by id, and
    the ids the registry does not have."""

    reader: str
    writers: Mapping[int, str]
    unknown: frozenset[int] = frozenset()

    @property
    def columns(self) -> list[str]:
        """The columns of the input's view: the reader schema's fields."""
        return avroschemas.field_names(self.reader)


def decode_exprs(reading: AvroReading) -> list[str]:
    """Stage 1 of an Avro input: the raw columns, and the record decoded with its writer's
    schema into the reader's, as a struct (NULL when no writer the query knows has its id),
    once per record (records.computed_once).

    The header is matched as bytes against the wire-format header of each writer: no number
    per record. Its id as a number (`conv(hex(...))`) took 0.12 s per 200k records against
    0.08 s for the match, where decoding them takes about 0.22 s (bench.decoding, local[1]);
    only bad records need the number (schema_id_expr).
    """
    reader = avroschemas.with_decoded_marker(reading.reader)
    options = f"map('mode', 'PERMISSIVE', 'avroSchema', {records.sql_string(reader)})"
    payload = f"substring(value, {_HEADER_BYTES + 1})"
    # A CASE needs a branch, and its type, when the query knows no writer: FALSE never runs.
    branches = [("FALSE", reader)] + [
        (f"startswith(value, {_header(schema_id)})", writer)
        for schema_id, writer in sorted(reading.writers.items())
    ]
    cases = " ".join(
        f"WHEN {matches} THEN from_avro({payload}, {records.sql_string(writer)}, {options})"
        for matches, writer in branches
    )
    return [*records.RAW_COLUMNS, f"{records.computed_once(f'CASE {cases} END')} AS {records.ROW}"]


def _header(schema_id: int) -> str:
    """The wire-format header of a schema id, as a BINARY literal."""
    return f"X'00{schema_id:08X}'"


def schema_id_expr(column: str = "value") -> str:
    """The writer's schema id of the value in `column` as a number (NULL when the value is not
    in the wire format). Only bad records need it: where it appears only in the branches of a
    CASE that good records never reach, good records never compute it."""
    return (
        f"CASE WHEN length({column}) >= {_HEADER_BYTES} AND substring({column}, 1, 1) = X'00' "
        f"THEN CAST(conv(hex(substring({column}, 2, 4)), 16, 10) AS BIGINT) END"
    )


def error_expr(reading: AvroReading, *, input_name: str) -> str:
    """Stage 2: why a record is bad, or NULL; a record of an id the query does not know stops
    it (UNKNOWN_ID_MARKER), before anything is written.

    A record is good when its marker is set: only a writer the query knows decoded it
    (decode_exprs), so a record of any other id goes on to the branches that read its id, which
    is computed there and not in a stage of its own: a column would be computed for every record
    (0.12 s per 200k records, about half of what decoding them costs: bench.decoding).
    """
    schema_id = schema_id_expr()
    stop = (
        f"raise_error(concat({records.sql_string(f'{UNKNOWN_ID_MARKER}: input {input_name}')}, "
        f"' schema id ', {schema_id}))"
    )
    known = ", ".join(str(i) for i in sorted(reading.writers))
    unknown = ", ".join(str(i) for i in sorted(reading.unknown))
    branches = [
        "WHEN value IS NULL THEN NULL",
        f"WHEN {records.ROW}.{avroschemas.DECODED_MARKER} IS NOT NULL THEN NULL",
        f"WHEN {schema_id} IS NULL THEN '{NOT_CONFLUENT_AVRO}'",
        *([f"WHEN {schema_id} IN ({unknown}) THEN '{UNKNOWN_SCHEMA_ID}'"] if unknown else []),
        f"WHEN {schema_id} NOT IN ({known}) THEN {stop}" if known else f"WHEN TRUE THEN {stop}",
    ]
    return f"CASE {' '.join(branches)} ELSE '{CORRUPT_AVRO}' END AS {records.ERROR}"


def reason_expr() -> str:
    """A sentence for the error kind of a bad Avro record."""
    schema_id = schema_id_expr()
    return (
        f"CASE {records.ERROR} WHEN '{NOT_CONFLUENT_AVRO}' THEN 'value is not in the Confluent "
        f"wire format (a zero byte, then a 4-byte schema id)' "
        f"WHEN '{UNKNOWN_SCHEMA_ID}' THEN concat('schema id ', {schema_id}, ' is not an Avro "
        f"schema in the schema registry') "
        f"ELSE concat('value does not decode with schema id ', {schema_id}, ' (a truncated or "
        f"corrupt Avro payload)') END"
    )


def unknown_ids(error: str) -> dict[str, set[int]]:
    """The schema ids, by input, that stopped a query (UNKNOWN_ID_MARKER in its error)."""
    found: dict[str, set[int]] = {}
    for name, schema_id in _UNKNOWN_ID.findall(error):
        found.setdefault(name, set()).add(int(schema_id))
    return found


def decode_value_expr(column: str, reading: AvroReading, *, input_name: str) -> str:
    """A Table's Avro value in `column` (BINARY) as a struct of the reader's fields, in one
    expression: for Table reads and lookups, which have no stage to split bad records off.

    A value of an id the query does not know stops it (UNKNOWN_ID_MARKER, as a topic input's
    do) rather than read as NULL: the writing App registered a new version, and the driver
    plans again with it. A value that is not in the wire format, or does not decode, reads as
    NULL, as a json Table's unparsable value does.
    """
    schema_id = schema_id_expr(column)
    options = f"map('mode', 'PERMISSIVE', 'avroSchema', {records.sql_string(reading.reader)})"
    payload = f"substring({column}, {_HEADER_BYTES + 1})"
    stop = (
        f"raise_error(concat({records.sql_string(f'{UNKNOWN_ID_MARKER}: input {input_name}')}, "
        f"' schema id ', {schema_id}))"
    )
    branches = [(_NO_ID, reading.reader), *sorted(reading.writers.items())]
    cases = " ".join(
        f"WHEN {writer_id} THEN from_avro({payload}, {records.sql_string(writer)}, {options})"
        for writer_id, writer in branches
    )
    unreadable = f"{schema_id} IS NULL" + (
        f" OR {schema_id} IN ({', '.join(str(i) for i in sorted(reading.unknown))})"
        if reading.unknown
        else ""
    )
    return f"CASE {schema_id} {cases} ELSE CASE WHEN {unreadable} THEN NULL ELSE {stop} END END"
