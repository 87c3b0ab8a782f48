"""The Protobuf schemas an App's queries are planned with, from the registry (or inline).

Reading: at start, each Protobuf input's reader is fixed (inline `.proto` text, compiled by
protoc; a version of its subject; or the latest) with its message (given, else the schema's
first, as Confluent's serializers take it), and the writers it knows are every version of its
subject: for each, the messages of its file by their indexes, which is all a record's header
needs (its payload is parsed as the reader's message). A record of another id stops its query
(protorecords.UnknownSchemaIdError, whose line is avrorecords.UNKNOWN_ID_MARKER's); `learn`
asks the registry for it, and the driver plans the queries again, as for Avro. A schema's
references (imports of other subjects' files) are resolved through the registry; the
well-known types are built in (protofiles).

Writing: an output's key or value message is derived from its columns (protoschemas: its
`.proto` text registered), or given inline (the text registered), or a registered version
(nothing registered). Each column must be a field of the message, checked before any query
starts. A refusal of the registry stalls the App (registryasking).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from confluent_kafka.schema_registry import Schema
from google.protobuf import descriptor_pb2

from rillet.driverapi import runspecs
from rillet.runtime.driver import registryasking
from rillet.runtime.queries import protocompiling, protofiles, protorecords, protoschemas, records

log = logging.getLogger(__name__)

PROTOBUF = registryasking.PROTOBUF
SchemaRegistryRefusedError = registryasking.SchemaRegistryRefusedError
_ADVICE = (
    "Make the change compatible with the subject's versions (add fields with new numbers; "
    "never change or reuse a field's number or type), or write to another subject"
)


class ProtoCatalog:
    """The Protobuf readers and writers of one App's queries."""

    def __init__(self, registry: registryasking.Registry) -> None:
        self._registry = registry
        self._readings: dict[str, protorecords.ProtoReading] = {}
        self._writings: dict[tuple[str, str], protorecords.ProtoWriting] = {}
        self._files: dict[int, protofiles.ProtoFiles] = {}  # by schema id

    def reads(self, name: str) -> bool:
        """Whether input `name` is one of the catalog's (Protobuf) inputs."""
        return name in self._readings

    # Reading --------------------------------------------------------------------------------

    def readings(self, spec: runspecs.RunSpec) -> dict[str, protorecords.ProtoReading]:
        """How each Protobuf input is decoded now (its reader fixed at the first call)."""
        for item in spec.inputs:
            if item.protobuf is not None and item.name not in self._readings:
                self._readings[item.name] = self._first_reading(item.name, item.protobuf)
        return dict(self._readings)

    def _first_reading(self, name: str, proto: runspecs.ProtobufSpec) -> protorecords.ProtoReading:
        where = f"input {name}"
        versions = self._registry.versions(proto.subject, PROTOBUF)
        writers, unknown = self._writers(where, versions.values())
        if proto.inline_schema is not None:
            reader = _compiled(where, proto.inline_schema, name=f"{name}.proto")
        elif not versions:
            raise SchemaRegistryRefusedError(
                f"{where}: subject {proto.subject} has no Protobuf schema in the registry: "
                f"register one (a producer's serializer does on its first record), or give the "
                f"input's reader schema inline (protobuf.schema and protobuf.message)"
            )
        elif proto.version is not None:
            registered = self._registry.version(where, proto.subject, proto.version)
            reader = self._files_of(where, registered)
        else:
            reader = self._files_of(where, versions[max(versions)])
        message = _message(where, reader, proto.message)
        reading = protorecords.ProtoReading(
            reader=reader, message=message, writers=writers, unknown=frozenset(unknown)
        )
        try:
            reading.struct_type()  # a message that contains itself has no columns
        except protofiles.ProtoSchemaError as error:
            raise protofiles.ProtoSchemaError(f"{where}: {error}") from None
        log.info(
            "input %s reads %s as %s with %d writer schemas",
            name,
            proto.subject,
            message,
            len(writers),
        )
        return reading

    def _writers(
        self, where: str, registered: Iterable[registryasking.Registered]
    ) -> tuple[dict[int, protorecords.MessagePaths], set[int]]:
        """The message paths of each writer's schema by id, and the ids whose schemas do not
        build (their records are bad records, as an id the registry has not)."""
        writers: dict[int, protorecords.MessagePaths] = {}
        broken: set[int] = set()
        for schema in registered:
            try:
                files = self._files_of(where, schema)
            except protofiles.ProtoSchemaError as error:
                log.warning("%s: schema id %d does not build: %s", where, schema.schema_id, error)
                broken.add(schema.schema_id)
                continue
            writers[schema.schema_id] = protorecords.writer_paths(files)
        return writers, broken

    def learn(self, name: str, schema_ids: Iterable[int]) -> None:
        """Ask the registry for schema ids an input's records carry and its query did not know:
        each is a writer's schema, or unknown (not Protobuf, or not building)."""
        reading = self._readings[name]
        writers, unknown = dict(reading.writers), set(reading.unknown)
        for schema_id in schema_ids:
            schema = self._registry.schema(schema_id, PROTOBUF)
            found: dict[int, protorecords.MessagePaths] = {}
            if schema is not None:
                as_registered = registryasking.Registered(schema_id, schema)
                found, broken = self._writers(f"input {name}", [as_registered])
                unknown |= broken
            else:
                unknown.add(schema_id)
            writers.update(found)
            log.info(
                "input %s: schema id %d %s",
                name,
                schema_id,
                "learned" if found else "not a Protobuf schema of the registry",
            )
        self._readings[name] = protorecords.ProtoReading(
            reader=reading.reader,
            message=reading.message,
            writers=writers,
            unknown=frozenset(unknown),
        )

    def _files_of(self, where: str, registered: registryasking.Registered) -> protofiles.ProtoFiles:
        """A registered schema's files, its references resolved (each id once)."""
        cached = self._files.get(registered.schema_id)
        if cached is not None:
            return cached
        imports: dict[str, descriptor_pb2.FileDescriptorProto] = {}
        for reference in registered.schema.references or ():
            referred = self._registry.version(
                where, str(reference.subject), int(reference.version or 0)
            )
            *deeper, main = (
                descriptor_pb2.FileDescriptorProto.FromString(serialized)
                for serialized in self._files_of(where, referred).files
            )
            for file in deeper:
                imports.setdefault(file.name, file)
            # The importing file names it by the reference's name, whatever the referred
            # schema's own file is called.
            main.name = str(reference.name)
            imports.setdefault(main.name, main)
        name = f"{registered.schema_id}.proto"
        files = _compiled(where, registered.text, name=name, imports=list(imports.values()))
        self._files[registered.schema_id] = files
        return files

    # Writing --------------------------------------------------------------------------------

    def encodings(
        self, output: runspecs.OutputSpec, struct: Mapping[str, Any]
    ) -> protorecords.ProtoEncodings:
        """An output's Protobuf key and value messages, registered (or taken registered) for
        a result of Spark type `struct` (`StructType.jsonValue()`)."""
        keys, values = records.record_columns(output, [f["name"] for f in struct["fields"]])
        key = value = None
        if output.key_protobuf is not None and keys:
            key = self._writing(output, "key", output.key_protobuf, struct, keys)
        if output.value_protobuf is not None:
            value = self._writing(output, "value", output.value_protobuf, struct, values)
        return protorecords.ProtoEncodings(key=key, value=value)

    def _writing(
        self,
        output: runspecs.OutputSpec,
        part: Literal["key", "value"],
        proto: runspecs.ProtobufSpec,
        struct: Mapping[str, Any],
        columns: tuple[str, ...],
    ) -> protorecords.ProtoWriting:
        cached = self._writings.get((output.id, part))
        if cached is not None:
            return cached
        where = f"output {output.id}: {part}"
        if proto.version is not None:
            registered = self._registry.version(where, proto.subject, proto.version)
            files = self._files_of(where, registered)
            message, schema_id = _message(where, files, proto.message), registered.schema_id
        else:
            if proto.inline_schema is not None:
                text = proto.inline_schema
                files = _compiled(where, text, name=f"{output.topic}-{part}.proto")
                message = _message(where, files, proto.message)
            else:
                name = protoschemas.message_name(f"{output.topic}_{part}")
                file = protoschemas.derive(struct, columns, name=name, what=where)
                text = protoschemas.render(file)
                files = protofiles.ProtoFiles.of([file])
                message = f"{protoschemas.PACKAGE}.{name}"
            schema = Schema(text, PROTOBUF)
            schema_id = self._registry.register(where, proto.subject, schema, advice=_ADVICE)
        _check_columns(where, files, message, columns)
        writing = protorecords.ProtoWriting(schema_id, files, message)
        self._writings[(output.id, part)] = writing
        return writing


def _compiled(
    where: str,
    text: str,
    *,
    name: str,
    imports: list[descriptor_pb2.FileDescriptorProto] | None = None,
) -> protofiles.ProtoFiles:
    try:
        return protocompiling.files_of(text, name=name, imports=imports or ())
    except protofiles.ProtoSchemaError as error:
        raise protofiles.ProtoSchemaError(f"{where}: {error}") from None


def _message(where: str, files: protofiles.ProtoFiles, name: str | None) -> str:
    try:
        message = protofiles.message_name(files.main, name)
        protofiles.message_class(files, message)  # builds, its imports resolved
    except protofiles.ProtoSchemaError as error:
        raise protofiles.ProtoSchemaError(f"{where}: {error}") from None
    return message


def _check_columns(
    where: str, files: protofiles.ProtoFiles, message: str, columns: Iterable[str]
) -> None:
    """Every column is a field of the message (else each record would fail to encode)."""
    fields = protofiles.descriptor(files, message).fields_by_name
    missing = [c for c in columns if c not in fields]
    if missing:
        raise protofiles.ProtoSchemaError(
            f"{where}: message {message} has no field {', '.join(missing)} (its fields: "
            f"{', '.join(fields)}): alias the columns as its fields, or leave the schema out "
            f"(derived from the columns)"
        )
