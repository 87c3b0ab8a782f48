"""A Protobuf message's fields as Spark columns (pure): the type of an input's view.

Nested messages are structs, repeated fields arrays, map fields maps; enums read as their
value's name; google.protobuf.Timestamp as a timestamp (microseconds: Spark's precision),
google.type.Date as a date,
the wrappers (StringValue & co.) as their nullable value, confluent.type.Decimal as a decimal
of the precision and scale its field declares in `(confluent.field_meta).params` (as
Confluent's converters write them), else decimal(38, 18); google.protobuf.Struct, Value and
ListValue as their JSON text. Unsigned 64-bit integers are decimal(20, 0): a bigint would turn
the upper half negative.

Nulls follow Protobuf's field presence: a field that has it (a message, a proto3 `optional`
or proto2 scalar, a member of a oneof: each member is a column of its own) is NULL when unset;
one that has not (a plain proto3 scalar) reads as its default (0, "", false), as every
Protobuf reader sees it; repeated and map fields are never NULL, at most empty.
A message that contains itself (directly or not) cannot be a column: refused.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from rillet.runtime.queries import protofiles

TIMESTAMP = "google.protobuf.Timestamp"
DATE = "google.type.Date"
DECIMAL = "confluent.type.Decimal"
JSON_MESSAGES = frozenset(
    {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
)
WRAPPERS = frozenset(
    f"google.protobuf.{kind}Value"
    for kind in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
)
DEFAULT_DECIMAL = (38, 18)
UNSIGNED_64 = "decimal(20,0)"
_SCALARS = {
    FieldDescriptor.TYPE_DOUBLE: "double",
    FieldDescriptor.TYPE_FLOAT: "float",
    FieldDescriptor.TYPE_INT64: "long",
    FieldDescriptor.TYPE_SINT64: "long",
    FieldDescriptor.TYPE_SFIXED64: "long",
    FieldDescriptor.TYPE_UINT64: UNSIGNED_64,
    FieldDescriptor.TYPE_FIXED64: UNSIGNED_64,
    FieldDescriptor.TYPE_INT32: "integer",
    FieldDescriptor.TYPE_SINT32: "integer",
    FieldDescriptor.TYPE_SFIXED32: "integer",
    FieldDescriptor.TYPE_UINT32: "long",  # up to 2^32 - 1: past Spark's integer
    FieldDescriptor.TYPE_FIXED32: "long",
    FieldDescriptor.TYPE_BOOL: "boolean",
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "binary",
    FieldDescriptor.TYPE_ENUM: "string",
}


def struct_type(message: Descriptor) -> dict[str, Any]:
    """The Spark struct type (`StructType.jsonValue()` form) of a message's fields."""
    return _struct(message, seen=(message.full_name,))


def column_names(message: Descriptor) -> list[str]:
    """The columns of a message's view: its fields' names, in their declared order."""
    return [field.name for field in message.fields]


def is_map(field: FieldDescriptor) -> bool:
    """Whether a field is a map (a repeated entry message the compiler made)."""
    return (
        field.is_repeated
        and field.message_type is not None
        and field.message_type.GetOptions().map_entry
    )


def decimal_type(field: FieldDescriptor) -> tuple[int, int]:
    """The precision and scale a confluent.type.Decimal field declares (else the default)."""
    params = dict(field.GetOptions().Extensions[protofiles.FIELD_META].params)
    if "precision" not in params:
        return DEFAULT_DECIMAL
    return int(params["precision"]), int(params.get("scale", "0"))


def _struct(message: Descriptor, *, seen: tuple[str, ...]) -> dict[str, Any]:
    fields = [_field(field, seen=seen) for field in message.fields]
    return {"type": "struct", "fields": fields}


def _field(field: FieldDescriptor, *, seen: tuple[str, ...]) -> dict[str, Any]:
    if is_map(field):
        entry = field.message_type.fields_by_name
        key, value = entry["key"], entry["value"]
        spark: Any = {
            "type": "map",
            "keyType": _value_type(key, seen=seen),
            "valueType": _value_type(value, seen=seen, declared=field),
            "valueContainsNull": False,  # an entry's value is on the wire even when empty
        }
        nullable = False
    elif field.is_repeated:
        spark = {
            "type": "array",
            "elementType": _value_type(field, seen=seen),
            "containsNull": False,  # a repeated field holds no nulls, not even of messages
        }
        nullable = False
    else:
        spark = _value_type(field, seen=seen)
        nullable = field.has_presence
    return {"name": field.name, "type": spark, "nullable": nullable, "metadata": {}}


def _value_type(
    field: FieldDescriptor, *, seen: tuple[str, ...], declared: FieldDescriptor | None = None
) -> Any:
    """The Spark type of one value of a field (an element, for a repeated one; a map's value,
    whose options are the map field's: `declared`)."""
    message = field.message_type
    if message is None:
        return _SCALARS[field.type]
    if message.full_name == TIMESTAMP:
        return "timestamp"
    if message.full_name == DATE:
        return "date"
    if message.full_name in WRAPPERS:
        return _value_type(message.fields_by_name["value"], seen=seen)
    if message.full_name == DECIMAL:
        precision, scale = decimal_type(declared or field)
        return f"decimal({precision},{scale})"
    if message.full_name in JSON_MESSAGES:
        return "string"
    if message.full_name in seen:
        raise protofiles.ProtoSchemaError(
            f"message {message.full_name} contains itself (field {field.full_name}): a "
            f"recursive message has no Spark type; read the field as bytes in another message"
        )
    return _struct(message, seen=(*seen, message.full_name))
