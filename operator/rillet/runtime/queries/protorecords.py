"""Protobuf records in the Confluent wire format to rows and back (pure), per record, for the
Python workers of a query (spark-protobuf is not in the runtime: no Maven artifact for Spark
4.2).

A record's value is a zero byte, the 4-byte big-endian id of its writer's schema, the message
indexes (which message of the schema's file: a count, then each index, as zigzag varints; the
usual `[0]`, the file's first message, is a single zero byte), then the Protobuf payload.

Reading: a payload is parsed with the input's *reader* message (Protobuf's own evolution: by
field number, fields the reader lacks skipped, fields the writer lacked at their default or
NULL); the writer's schema tells which message the record is (its indexes), which must be the
reader's, by name. A query knows the writers' message paths by id (`ProtoReading.writers`, from
the registry by the driver): a record of another id stops it (`UnknownSchemaIdError`, whose
message is avrorecords' UNKNOWN_ID_MARKER line, so the driver learns the id and plans again, as
for Avro), unless the registry said it has no such Protobuf schema (`unknown`).

Bad records are values, with a kind, as avrorecords' are: not in the wire format
(`not-confluent-protobuf`), of an id the registry does not have (`unknown-schema-id`), of
another message than the input's (`other-protobuf-message`), or not parsing as the reader's
message, or holding a value its column cannot (`corrupt-protobuf`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

from google.protobuf.message import DecodeError

from rillet.runtime.queries import avrorecords, protocolumns, protofiles, protovalues

NOT_CONFLUENT_PROTOBUF = "not-confluent-protobuf"
UNKNOWN_SCHEMA_ID = avrorecords.UNKNOWN_SCHEMA_ID
OTHER_MESSAGE = "other-protobuf-message"
CORRUPT_PROTOBUF = "corrupt-protobuf"
_MAGIC = 0
_ID_END = 5
# No schema nests messages this deep; a longer count is a corrupt header, not a path to follow.
_MAX_INDEXES = 64

MessagePaths = Mapping[tuple[int, ...], str]


class UnknownSchemaIdError(RuntimeError):
    """A record of a schema id the query does not know: the driver learns it, plans again."""

    def __init__(self, input_name: str, schema_id: int) -> None:
        super().__init__(
            f"{avrorecords.UNKNOWN_ID_MARKER}: input {input_name} schema id {schema_id}"
        )
        self.input_name = input_name
        self.schema_id = schema_id


@dataclasses.dataclass(frozen=True)
class Header:
    """A record's wire-format header: its writer's id, its message's indexes, and where its
    payload starts."""

    schema_id: int
    indexes: tuple[int, ...]
    payload_start: int


@dataclasses.dataclass(frozen=True)
class ProtoReading:
    """What a query decodes a Protobuf input with: the reader's schema and message, each
    writer's messages by their indexes, by schema id, and the ids the registry has not."""

    reader: protofiles.ProtoFiles
    message: str
    writers: Mapping[int, MessagePaths]
    unknown: frozenset[int] = frozenset()

    @property
    def columns(self) -> list[str]:
        """The columns of the input's view: the reader message's fields."""
        return protocolumns.column_names(protofiles.descriptor(self.reader, self.message))

    def struct_type(self) -> dict[str, Any]:
        """The Spark type of a decoded record (`StructType.jsonValue()` form)."""
        return protocolumns.struct_type(protofiles.descriptor(self.reader, self.message))


def writer_paths(files: protofiles.ProtoFiles) -> dict[tuple[int, ...], str]:
    """A writer schema's messages by their indexes (what ProtoReading.writers holds)."""
    return protofiles.message_paths(files.main)


@dataclasses.dataclass(frozen=True)
class Decoded:
    """A record read: its row, or why it is bad; its writer's id when it has a header."""

    row: dict[str, Any] | None
    error: str | None
    schema_id: int | None


def decode(reading: ProtoReading, value: bytes, *, input_name: str) -> Decoded:
    """A record's value as a row of the reader's columns, or a bad record's kind; raises
    UnknownSchemaIdError for an id the query does not know (see the module's docstring)."""
    if len(value) < _ID_END or value[0] != _MAGIC:
        return Decoded(None, NOT_CONFLUENT_PROTOBUF, None)
    schema_id = int.from_bytes(value[1:_ID_END], "big")
    paths = reading.writers.get(schema_id)
    if paths is None:
        if schema_id in reading.unknown:
            return Decoded(None, UNKNOWN_SCHEMA_ID, schema_id)
        raise UnknownSchemaIdError(input_name, schema_id)
    header = parse_header(value)
    if header is None or header.indexes not in paths:
        return Decoded(None, CORRUPT_PROTOBUF, schema_id)
    if paths[header.indexes] != reading.message:
        return Decoded(None, OTHER_MESSAGE, schema_id)
    message = protofiles.message_class(reading.reader, reading.message)()
    try:
        message.ParseFromString(value[header.payload_start :])
        row = protovalues.to_row(message)
    except (DecodeError, protovalues.ProtoValueError):
        return Decoded(None, CORRUPT_PROTOBUF, schema_id)
    return Decoded(row, None, schema_id)


def parse_header(value: bytes) -> Header | None:
    """A value's header, None when it has none (too short, another first byte, or message
    indexes that do not parse)."""
    if len(value) < _ID_END or value[0] != _MAGIC:
        return None
    try:
        count, at = _zigzag(value, _ID_END)
        if count == 0:
            return Header(int.from_bytes(value[1:_ID_END], "big"), (0,), at)
        if not 0 < count <= _MAX_INDEXES:
            return None
        indexes = []
        for _ in range(count):
            index, at = _zigzag(value, at)
            indexes.append(index)
    except IndexError:  # the value ends inside a varint
        return None
    return Header(int.from_bytes(value[1:_ID_END], "big"), tuple(indexes), at)


def _zigzag(value: bytes, at: int) -> tuple[int, int]:
    """The zigzag varint at `at`, and where the next starts."""
    number = shift = 0
    while True:
        byte = value[at]
        at += 1
        number |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (number >> 1) ^ -(number & 1), at


# Writing --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ProtoWriting:
    """What an output encodes a Protobuf key or value with: the registered schema's id, its
    files, and the message written."""

    schema_id: int
    files: protofiles.ProtoFiles
    message: str


def header(schema_id: int, indexes: tuple[int, ...]) -> bytes:
    """The wire-format header of a schema id and message indexes."""
    prefix = bytes([_MAGIC]) + schema_id.to_bytes(4, "big")
    if indexes == (0,):
        return prefix + b"\x00"  # the file's first message: the count 0 stands for [0]
    return prefix + b"".join(_varint(number) for number in (len(indexes), *indexes))


def _varint(number: int) -> bytes:
    zigzag = (number << 1) ^ (number >> 63)
    out = bytearray()
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


@functools.lru_cache(maxsize=64)
def _header_of(writing: ProtoWriting) -> bytes:
    return header(
        writing.schema_id, protofiles.message_indexes(writing.files.main, writing.message)
    )


def encode(writing: ProtoWriting, row: Mapping[str, Any]) -> bytes:
    """A row as a record's value in the wire format (protovalues.fill says how values map)."""
    message = protofiles.message_class(writing.files, writing.message)()
    payload: bytes = protovalues.fill(message, row).SerializeToString()
    return _header_of(writing) + payload


@dataclasses.dataclass(frozen=True)
class ProtoEncodings:
    """The Protobuf messages of an output, for its protobuf key and value."""

    key: ProtoWriting | None = None
    value: ProtoWriting | None = None
