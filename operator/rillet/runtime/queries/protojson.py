"""A Table's Protobuf values as JSON, for `rillet table get`, `--watch` and Table servers.

A value is in the Confluent wire format (protorecords): its header names its writer's schema
and which message of it the value is. The schema is asked of the registry by id (once per id,
in its plain form: Apicurio cannot serve `?format=serialized`, docs/formats.md), its
references resolved through the registry, `.proto` text compiled by protoc (protocompiling:
grpcio-tools, which the runtime and operator images carry), and the payload parsed as the
writer's own message: every version a Table was written with prints as it was written.

The JSON is Protobuf's own mapping (json_format.MessageToDict) with the fields' names as the
schema declares them, and every field without presence printed, at its default too (a count of
0 is a count, not a missing field; fields with presence print only when set). Decimals
(`confluent.type.Decimal`) print as exact text (`"12.50"`), as Avro's do (avrovalues).

This module is the runtime's (it compiles schemas, as the driver does) and stands behind
tables.registryvalues.RegistryValues, which Table servers take.
"""

from __future__ import annotations

import decimal
import json
from collections.abc import Mapping
from typing import Any, Final

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from google.protobuf import descriptor_pb2, json_format
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError, Message

from rillet.runtime.queries import protocolumns, protocompiling, protofiles, protorecords
from rillet.tables import registryvalues

_NOT_FOUND: Final = 404
_PROTOBUF: Final = "PROTOBUF"
# Messages whose JSON is not an object of their fields (RFC 3339 text, a number, any JSON).
_OWN_JSON_PREFIX: Final = "google.protobuf."
# Exact: the default context keeps 28 digits, and a decimal(38, s) has up to 38.
_EXACT: Final = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


class ProtoValueError(registryvalues.UndecodableValueError):
    """A Protobuf value that does not decode (the message says why)."""


def to_json(message: Message) -> dict[str, Any]:
    """A message as JSON-ready data (see the module's docstring)."""
    data: dict[str, Any] = json_format.MessageToDict(
        message,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
    )
    return _with_decimal_text(message, data)


def decimal_text(message: Any) -> str:
    """A `confluent.type.Decimal` as exact text: its unscaled two's complement and scale."""
    unscaled = int.from_bytes(message.value, "big", signed=True)
    value = decimal.Decimal(unscaled).scaleb(-int(message.scale), _EXACT)
    return format(value, "f")


def _converted(descriptor: Descriptor, message: Message, data: Any) -> Any:
    """One message's JSON with its decimals as text."""
    if descriptor.full_name == protocolumns.DECIMAL:
        return decimal_text(message)
    if descriptor.full_name.startswith(_OWN_JSON_PREFIX) or not isinstance(data, dict):
        return data
    return _with_decimal_text(message, data)


def _with_decimal_text(message: Message, data: dict[str, Any]) -> dict[str, Any]:
    for field in message.DESCRIPTOR.fields:
        if field.name not in data or field.message_type is None:
            continue
        value = getattr(message, field.name)
        if protocolumns.is_map(field):
            entry = field.message_type.fields_by_name["value"]
            if entry.message_type is not None:
                data[field.name] = {
                    _map_key(key): _converted(
                        entry.message_type, item, data[field.name][_map_key(key)]
                    )
                    for key, item in value.items()
                }
        elif field.is_repeated:
            data[field.name] = [
                _converted(field.message_type, item, text)
                for item, text in zip(value, data[field.name], strict=True)
            ]
        else:
            data[field.name] = _converted(field.message_type, value, data[field.name])
    return data


def _map_key(key: Any) -> str:
    """A map key as json_format writes it."""
    return ("true" if key else "false") if isinstance(key, bool) else str(key)


class ProtoValues:
    """Decodes one topic's Protobuf values with the schemas of a registry."""

    def __init__(
        self,
        registry_config: Mapping[str, Any],
        topic: str,
        *,
        client: SchemaRegistryClient | None = None,
    ) -> None:
        self._client = client or SchemaRegistryClient(dict(registry_config))
        self.topic = topic
        self._files: dict[int, protofiles.ProtoFiles] = {}  # by schema id

    def decoded(self, data: bytes) -> Any:
        """The value as JSON-ready data; raises ProtoValueError saying why it does not decode.

        A registry that does not answer raises its own error: that is not the value's fault.
        """
        header = protorecords.parse_header(data)
        if header is None:
            raise ProtoValueError(
                "it is not in the Confluent wire format (a zero byte, a 4-byte schema id, the "
                "message indexes)"
            )
        files = self._schema_files(header.schema_id)
        name = protofiles.message_paths(files.main).get(header.indexes)
        if name is None:
            raise ProtoValueError(
                f"schema id {header.schema_id} has no message at indexes {list(header.indexes)}"
            )
        message = protofiles.message_class(files, name)()
        try:
            message.ParseFromString(data[header.payload_start :])
        except DecodeError as error:
            raise ProtoValueError(f"the payload does not parse as {name} ({error})") from None
        return to_json(message)

    def text(self, data: bytes) -> str:
        """The value as compact JSON text; an undecodable one as a sentence in angle brackets."""
        try:
            return json.dumps(self.decoded(data), separators=(",", ":"))
        except ProtoValueError as error:
            return f"<undecodable protobuf value: {error}>"

    def close(self) -> None:
        """Close the registry client's connections."""
        self._client.close()

    def _schema_files(self, schema_id: int) -> protofiles.ProtoFiles:
        """The files of a schema id (its references resolved), built once."""
        cached = self._files.get(schema_id)
        if cached is not None:
            return cached
        try:
            schema = self._client.get_schema(schema_id)
        except SchemaRegistryError as error:
            if error.http_status_code != _NOT_FOUND:
                raise
            raise ProtoValueError(f"its schema id {schema_id} is not in the registry") from None
        if schema.schema_type != _PROTOBUF:
            raise ProtoValueError(
                f"its schema id {schema_id} is a {schema.schema_type or 'AVRO'} schema, not "
                f"a Protobuf one"
            )
        imports: dict[str, descriptor_pb2.FileDescriptorProto] = {}
        for reference in schema.references or ():
            referred = self._client.get_version(str(reference.subject), int(reference.version or 0))
            *deeper, main = (
                descriptor_pb2.FileDescriptorProto.FromString(serialized)
                for serialized in self._schema_files(int(referred.schema_id or 0)).files
            )
            for file in deeper:
                imports.setdefault(file.name, file)
            main.name = str(reference.name)  # the name the importing file gives it
            imports.setdefault(main.name, main)
        try:
            files = protocompiling.files_of(
                schema.schema_str or "", name=f"{schema_id}.proto", imports=list(imports.values())
            )
        except protofiles.ProtoSchemaError as error:
            raise ProtoValueError(f"schema id {schema_id} does not build: {error}") from None
        self._files[schema_id] = files
        return files
