"""Protobuf schemas as the registry serves them, to descriptors (pure).

A registry holds a Protobuf schema as one `.proto` file, in one of two forms: the text of the
file (what Java clients register, and what Confluent's registry serves by default), or a
FileDescriptorProto in base64 (what confluent-kafka's Python serializer registers; Apicurio
serves it back as it was given, and its `?format=serialized` answers HTTP 500 for it, and
mangles the bytes of a text schema: docs/formats.md). Both are taken: `registered_file` reads
the second, protocompiling the first. Imports of the well-known types (google/protobuf/*,
google/type/*, confluent/*) are built in, as Confluent's serializers assume (they register no
reference for them by default); other imports are the schema's references, resolved by the
driver.

`ProtoFiles` is a schema with its imports as serialized FileDescriptorProtos, which is what a
query ships to its Python workers: each builds a descriptor pool of its own from it (two
versions of a subject define the same names, which one pool refuses).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
from collections.abc import Iterable, Iterator
from typing import Any

from confluent_kafka.schema_registry.confluent import meta_pb2
from confluent_kafka.schema_registry.confluent.type import decimal_pb2
from google.protobuf import (
    any_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    message_factory,
    struct_pb2,
    timestamp_pb2,
    wrappers_pb2,
)
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError, Message
from google.type import date_pb2

BUILTIN_PREFIXES = ("google/protobuf/", "google/type/", "confluent/")
# The files a schema may import without a reference, dependencies before their dependents.
_BUILTIN_MODULES = (
    descriptor_pb2,
    any_pb2,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    struct_pb2,
    timestamp_pb2,
    wrappers_pb2,
    date_pb2,
    decimal_pb2,
    meta_pb2,
)
BUILTIN_FILES: tuple[bytes, ...] = tuple(m.DESCRIPTOR.serialized_pb for m in _BUILTIN_MODULES)
# `(confluent.field_meta)`: the option Confluent's converters declare a decimal's precision in.
FIELD_META: Any = meta_pb2.DESCRIPTOR.extensions_by_name["field_meta"]


class ProtoSchemaError(ValueError):
    """A schema that does not make the message asked for (the message says why)."""


def is_builtin(name: str) -> bool:
    """Whether an imported file is one of the well-known types (never a reference)."""
    return name.startswith(BUILTIN_PREFIXES)


def registered_file(schema: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The file of a schema registered as a base64 FileDescriptorProto; None for `.proto` text.

    Text always has characters base64 has not (spaces, `;`, quotes), so the two never mix up.
    """
    try:
        serialized = base64.b64decode(schema.strip(), validate=True)
        file = descriptor_pb2.FileDescriptorProto.FromString(serialized)
    except (binascii.Error, ValueError, DecodeError):
        return None
    return file if file.message_type else None


@dataclasses.dataclass(frozen=True)
class ProtoFiles:
    """A schema's file and the files it imports (other than the built-in ones), each a
    serialized FileDescriptorProto, imports first, the schema's own file last."""

    files: tuple[bytes, ...]

    @property
    def main(self) -> descriptor_pb2.FileDescriptorProto:
        """The schema's own file."""
        return descriptor_pb2.FileDescriptorProto.FromString(self.files[-1])

    @classmethod
    def of(cls, files: Iterable[descriptor_pb2.FileDescriptorProto]) -> ProtoFiles:
        """Files in order, imports first; built-in ones are left out (every pool has them)."""
        return cls(tuple(f.SerializeToString() for f in files if not is_builtin(f.name)))


def build_pool(files: ProtoFiles) -> descriptor_pool.DescriptorPool:
    """A descriptor pool of the built-in files and the schema's."""
    pool = descriptor_pool.DescriptorPool()
    for serialized in BUILTIN_FILES:
        pool.AddSerializedFile(serialized)
    for serialized in files.files:
        try:
            pool.AddSerializedFile(serialized)
        except (TypeError, ValueError) as error:  # an unresolved import or a clash of names
            name = descriptor_pb2.FileDescriptorProto.FromString(serialized).name
            raise ProtoSchemaError(f"file {name} does not build: {error}") from None
    return pool


@functools.lru_cache(maxsize=64)
def message_class(files: ProtoFiles, full_name: str) -> type[Message]:
    """The message class of `full_name` in the schema, one per process and schema (a Python
    worker decodes many batches with it)."""
    pool = build_pool(files)
    try:
        descriptor = pool.FindMessageTypeByName(full_name)
    except KeyError:
        raise ProtoSchemaError(
            f"schema {files.main.name} has no message {full_name}; it has "
            f"{', '.join(message_paths(files.main).values()) or 'none'}"
        ) from None
    made: type[Message] = message_factory.GetMessageClass(descriptor)
    return made


def message_paths(file: descriptor_pb2.FileDescriptorProto) -> dict[tuple[int, ...], str]:
    """Every message of a file by its message indexes (the wire format's path: its place among
    the file's messages, then among each enclosing message's nested ones) -> its full name.

    Map fields' entries are messages too, nested in theirs; they keep their place in the path.
    """
    prefix = f"{file.package}." if file.package else ""
    return dict(_paths(file.message_type, (), prefix))


def _paths(
    messages: Iterable[descriptor_pb2.DescriptorProto], path: tuple[int, ...], prefix: str
) -> Iterator[tuple[tuple[int, ...], str]]:
    for index, message in enumerate(messages):
        name = f"{prefix}{message.name}"
        yield (*path, index), name
        yield from _paths(message.nested_type, (*path, index), f"{name}.")


def message_name(file: descriptor_pb2.FileDescriptorProto, name: str | None) -> str:
    """The full name of the message a schema is read or written as: `name` (full, or relative
    to the file's package), by default the file's first message (as Confluent's serializers
    take it)."""
    names = list(message_paths(file).values())
    if not names:
        raise ProtoSchemaError(f"schema {file.name} defines no message")
    if name is None:
        return names[0]
    prefix = f"{file.package}." if file.package else ""
    for candidate in (name.lstrip("."), f"{prefix}{name}"):
        if candidate in names:
            return candidate
    raise ProtoSchemaError(f"schema {file.name} has no message {name}; it has {', '.join(names)}")


def message_indexes(file: descriptor_pb2.FileDescriptorProto, full_name: str) -> tuple[int, ...]:
    """The message indexes of a message of the file (`(0,)` for its first message)."""
    for path, name in message_paths(file).items():
        if name == full_name:
            return path
    raise ProtoSchemaError(f"schema {file.name} has no message {full_name}")


def descriptor(files: ProtoFiles, full_name: str) -> Descriptor:
    """The descriptor of a message of the schema."""
    descriptor: Descriptor = message_class(files, full_name).DESCRIPTOR
    return descriptor
