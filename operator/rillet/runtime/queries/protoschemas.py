"""The Protobuf schema of an output, derived from its columns (pure), as avroschemas derives an
Avro one: a FileDescriptorProto to encode with, and its `.proto` text to register.

The text is what is registered (every registry and client reads it; Apicurio serves a base64
descriptor back only as it was given, protofiles' docstring says why that matters). Columns
are fields numbered in their order; nullable scalars are proto3 `optional` (so NULL and 0 stay
apart; a column added later is a new number, which BACKWARD compatibility allows); structs are
nested messages; arrays repeated fields; maps map fields; timestamps google.protobuf.Timestamp;
dates google.type.Date; decimals confluent.type.Decimal with their precision and scale in
`(confluent.field_meta).params`, as Confluent's converters declare them (protocolumns reads
them back). What Protobuf cannot hold is refused, saying what to change: a column name that is
not an identifier, arrays of arrays or maps, maps of arrays or maps, map keys that are not
strings, integers or booleans.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf import descriptor_pb2

from rillet.runtime.queries import protofiles

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "string": _F.TYPE_STRING,
    "binary": _F.TYPE_BYTES,
    "boolean": _F.TYPE_BOOL,
    "byte": _F.TYPE_INT32,
    "short": _F.TYPE_INT32,
    "integer": _F.TYPE_INT32,
    "long": _F.TYPE_INT64,
    "float": _F.TYPE_FLOAT,
    "double": _F.TYPE_DOUBLE,
}
_KEYS = {"string", "byte", "short", "integer", "long", "boolean"}
_MESSAGES = {
    "timestamp": (".google.protobuf.Timestamp", "google/protobuf/timestamp.proto"),
    "timestamp_ntz": (".google.protobuf.Timestamp", "google/protobuf/timestamp.proto"),
    "date": (".google.type.Date", "google/type/date.proto"),
}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_DECIMAL_FILES = ("confluent/type/decimal.proto", "confluent/meta.proto")
PACKAGE = "rillet"


class ProtoDerivationError(ValueError):
    """Columns that no Protobuf message can hold as they are (the message says what to do)."""


def message_name(text: str) -> str:
    """A message name made from a topic or column name: CamelCase of its words."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", text) if w]
    name = "".join(w[:1].upper() + w[1:] for w in words) or "Record"
    return name if name[0].isalpha() else f"M{name}"


def derive(
    struct: Mapping[str, Any], columns: Sequence[str], *, name: str, what: str
) -> descriptor_pb2.FileDescriptorProto:
    """The file of one message `name` holding `columns` of a Spark struct type
    (`StructType.jsonValue()`), in package `rillet`."""
    file = descriptor_pb2.FileDescriptorProto(
        name=f"{name}.proto", package=PACKAGE, syntax="proto3"
    )
    by_name = {field["name"]: field for field in struct["fields"]}
    message = file.message_type.add(name=name)
    for column in columns:
        _add_field(file, message, by_name[column], path=(f".{PACKAGE}.{name}",), what=what)
    _entries_last(message)
    imports = {dep for dep in file.dependency}
    file.ClearField("dependency")
    file.dependency.extend(sorted(imports))
    return file


def _entries_last(message: descriptor_pb2.DescriptorProto) -> None:
    """Nested messages in the order protoc gives them compiling `render`'s text (which writes
    nested messages before fields): map entries after the others, so that the file registered
    and the one encoded with have the same message indexes."""
    nested = sorted(message.nested_type, key=lambda n: n.options.map_entry)  # stable
    for inner in nested:
        _entries_last(inner)
    del message.nested_type[:]
    message.nested_type.extend(nested)


def _add_field(
    file: descriptor_pb2.FileDescriptorProto,
    message: descriptor_pb2.DescriptorProto,
    spark: Mapping[str, Any],
    *,
    path: tuple[str, ...],
    what: str,
) -> None:
    column = spark["name"]
    where = ".".join((*(p.rsplit(".", 1)[-1] for p in path[1:]), column))
    if not IDENTIFIER.match(column):
        raise ProtoDerivationError(
            f"{what}: column {where!r} is not a Protobuf field name (letters, digits and _, "
            f"not starting with a digit): give it an alias in the pipeline"
        )
    field = message.field.add(name=column, number=len(message.field) + 1)
    kind = spark["type"]
    if isinstance(kind, dict) and kind["type"] == "array":
        field.label = _F.LABEL_REPEATED
        _set_type(file, message, field, kind["elementType"], path=path, what=what, where=where)
    elif isinstance(kind, dict) and kind["type"] == "map":
        _add_map(file, message, field, kind, path=path, what=what, where=where)
    else:
        field.label = _F.LABEL_OPTIONAL
        _set_type(file, message, field, kind, path=path, what=what, where=where)
        if spark.get("nullable", True) and field.type != _F.TYPE_MESSAGE:
            field.proto3_optional = True  # presence: NULL is not 0; each gets a synthetic oneof
            field.oneof_index = len(message.oneof_decl)
            message.oneof_decl.add(name=f"_{column}")


def _add_map(
    file: descriptor_pb2.FileDescriptorProto,
    message: descriptor_pb2.DescriptorProto,
    field: descriptor_pb2.FieldDescriptorProto,
    kind: Mapping[str, Any],
    *,
    path: tuple[str, ...],
    what: str,
    where: str,
) -> None:
    if kind["keyType"] not in _KEYS:
        raise ProtoDerivationError(
            f"{what}: column {where} is a map with {kind['keyType']} keys; Protobuf maps have "
            f"string, integer or boolean keys: convert it in the pipeline"
        )
    # A map is a repeated entry message the compiler names FieldNameEntry, nested in its own.
    entry = message.nested_type.add(name=f"{_camel(field.name)}Entry")
    entry.options.map_entry = True
    key = entry.field.add(name="key", number=1, label=_F.LABEL_OPTIONAL)
    value = entry.field.add(name="value", number=2, label=_F.LABEL_OPTIONAL)
    _set_type(file, entry, key, kind["keyType"], path=path, what=what, where=where)
    entry_path = (*path, entry.name)
    _set_type(file, entry, value, kind["valueType"], path=entry_path, what=what, where=where)
    # A decimal's precision and scale go on the map field: `.proto` text has no place for an
    # entry value's options (protocolumns looks there).
    if value.HasField("options"):
        field.options.CopyFrom(value.options)
        value.ClearField("options")
    field.label = _F.LABEL_REPEATED
    field.type = _F.TYPE_MESSAGE
    field.type_name = f"{'.'.join(path)}.{entry.name}"


def _set_type(
    file: descriptor_pb2.FileDescriptorProto,
    message: descriptor_pb2.DescriptorProto,
    field: descriptor_pb2.FieldDescriptorProto,
    kind: Any,
    *,
    path: tuple[str, ...],
    what: str,
    where: str,
) -> None:
    if isinstance(kind, str):
        _set_simple(file, field, kind, what=what, where=where)
        return
    if kind["type"] != "struct":
        raise ProtoDerivationError(
            f"{what}: column {where} holds a {kind['type']} inside an array or map, which "
            f"Protobuf cannot: wrap it in a struct in the pipeline"
        )
    nested = message.nested_type.add(name=_camel(field.name))
    nested_path = (*path, nested.name)
    for spark in kind["fields"]:
        _add_field(file, nested, spark, path=nested_path, what=what)
    field.type = _F.TYPE_MESSAGE
    field.type_name = ".".join(nested_path)


def _set_simple(
    file: descriptor_pb2.FileDescriptorProto,
    field: descriptor_pb2.FieldDescriptorProto,
    kind: str,
    *,
    what: str,
    where: str,
) -> None:
    if kind in _SCALARS:
        field.type = _SCALARS[kind]
        return
    decimal = _DECIMAL.match(kind)
    if decimal:
        field.type, field.type_name = _F.TYPE_MESSAGE, ".confluent.type.Decimal"
        meta = field.options.Extensions[protofiles.FIELD_META]
        meta.params["precision"], meta.params["scale"] = decimal.group(1), decimal.group(2)
        file.dependency.extend(_DECIMAL_FILES)
        return
    if kind in _MESSAGES:
        field.type = _F.TYPE_MESSAGE
        field.type_name, dependency = _MESSAGES[kind]
        file.dependency.append(dependency)
        return
    raise ProtoDerivationError(
        f"{what}: column {where} is of type {kind}, which Protobuf cannot hold: cast it in the "
        f"pipeline (e.g. to STRING)"
    )


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part) or "Field"


# The .proto text -------------------------------------------------------------------------------

_KEYWORDS = {
    _F.TYPE_STRING: "string",
    _F.TYPE_BYTES: "bytes",
    _F.TYPE_BOOL: "bool",
    _F.TYPE_INT32: "int32",
    _F.TYPE_INT64: "int64",
    _F.TYPE_FLOAT: "float",
    _F.TYPE_DOUBLE: "double",
}


def render(file: descriptor_pb2.FileDescriptorProto) -> str:
    """The `.proto` text of a derived file (what `derive` makes; not any file)."""
    lines = [f'syntax = "{file.syntax}";', "", f"package {file.package};", ""]
    lines += [f'import "{dependency}";' for dependency in file.dependency]
    for message in file.message_type:
        lines += ["", *_message_lines(message, indent="")]
    return "\n".join(lines) + "\n"


def _message_lines(message: descriptor_pb2.DescriptorProto, *, indent: str) -> list[str]:
    inner = indent + "  "
    entries = {nested.name: nested for nested in message.nested_type if nested.options.map_entry}
    lines = [f"{indent}message {message.name} {{"]
    for nested in message.nested_type:
        if not nested.options.map_entry:
            lines += _message_lines(nested, indent=inner)
    for field in message.field:
        lines.append(f"{inner}{_field_text(field, entries)}")
    return [*lines, f"{indent}}}"]


def _field_text(
    field: descriptor_pb2.FieldDescriptorProto,
    entries: Mapping[str, descriptor_pb2.DescriptorProto],
) -> str:
    entry = entries.get(field.type_name.rsplit(".", 1)[-1]) if field.type_name else None
    if entry is not None:
        key, value = entry.field
        kind = f"map<{_type_text(key)}, {_type_text(value)}>"
        return f"{kind} {field.name} = {field.number}{_options_text(field)};"
    label = (
        "repeated "
        if field.label == _F.LABEL_REPEATED
        else "optional "
        if field.proto3_optional
        else ""
    )
    return f"{label}{_type_text(field)} {field.name} = {field.number}{_options_text(field)};"


def _type_text(field: descriptor_pb2.FieldDescriptorProto) -> str:
    return field.type_name if field.type == _F.TYPE_MESSAGE else _KEYWORDS[field.type]


def _options_text(field: descriptor_pb2.FieldDescriptorProto) -> str:
    meta = field.options.Extensions[protofiles.FIELD_META]
    if not meta.params:
        return ""
    params = ", ".join(
        f'{{key: "{key}", value: "{value}"}}' for key, value in sorted(meta.params.items())
    )
    return f" [(confluent.field_meta) = {{params: [{params}]}}]"
