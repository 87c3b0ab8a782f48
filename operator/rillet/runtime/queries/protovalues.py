"""Protobuf messages to rows and back (pure): the values of protocolumns' types.

A row is a dict of a message's fields by name, as pyarrow builds a Spark struct from it:
ints, floats, str, bytes, bool, decimal.Decimal, datetime (UTC), date, lists, dicts (maps, and
nested rows); None where protocolumns says a column is NULL. Writing takes the same, None
leaving a field unset; a datetime without a zone is taken as UTC (Spark's timestamps are
instants), an enum as its name or number.

Each message type's fields are turned into a list of converters once (`_readers`), not looked
up per record: a worker converts every record of a batch with them.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from rillet.runtime.queries import protocolumns

Row = dict[str, Any]
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
# Exact: a decimal's digits are never rounded by the context, only by the column's scale.
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


class ProtoValueError(ValueError):
    """A value the message cannot hold, or a stored value the column cannot (says which)."""


def to_row(message: Message) -> Row:
    """A message's fields as a row (see the module's docstring)."""
    return {name: read(message) for name, read in _readers(message.DESCRIPTOR)}


@functools.lru_cache(maxsize=256)
def _readers(message: Descriptor) -> tuple[tuple[str, Callable[[Message], Any]], ...]:
    return tuple((field.name, _field_reader(field)) for field in message.fields)


def _field_reader(field: FieldDescriptor) -> Callable[[Message], Any]:
    name = field.name
    value = _value_reader(field)
    if protocolumns.is_map(field):
        entry = field.message_type.fields_by_name["value"]
        entry_value = _value_reader(entry, declared=field)
        return lambda m: {k: entry_value(v) for k, v in getattr(m, name).items()}
    if field.is_repeated:
        return lambda m: [value(v) for v in getattr(m, name)]
    if field.has_presence:
        return lambda m: value(getattr(m, name)) if m.HasField(name) else None
    return lambda m: value(getattr(m, name))


def _value_reader(
    field: FieldDescriptor, *, declared: FieldDescriptor | None = None
) -> Callable[[Any], Any]:
    """How one value of a field (as the message holds it) becomes a column's value (a map's
    value's options are the map field's: `declared`)."""
    message = field.message_type
    if field.type == FieldDescriptor.TYPE_ENUM:
        names = {v.number: v.name for v in field.enum_type.values}
        return lambda number: names.get(number, str(number))  # a number of a later version
    if field.type in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return decimal.Decimal
    if message is None:
        return _same
    if message.full_name == protocolumns.TIMESTAMP:
        return _timestamp
    if message.full_name == protocolumns.DATE:
        return _date
    if message.full_name in protocolumns.WRAPPERS:
        inner = _value_reader(message.fields_by_name["value"])
        return lambda wrapper: inner(wrapper.value)
    if message.full_name == protocolumns.DECIMAL:
        scale = protocolumns.decimal_type(declared or field)[1]
        return functools.partial(_decimal, scale=scale, where=field.full_name)
    if message.full_name in protocolumns.JSON_MESSAGES:
        return lambda m: json.dumps(json_format.MessageToDict(m), separators=(",", ":"))
    return to_row


def _same(value: Any) -> Any:
    return value


def _timestamp(message: Any) -> datetime.datetime:
    # Microseconds: the nanoseconds below are past Spark's precision.
    return _EPOCH + datetime.timedelta(seconds=message.seconds, microseconds=message.nanos // 1000)


def _date(message: Any) -> datetime.date:
    try:
        return datetime.date(message.year, message.month, message.day)
    except ValueError as error:  # a Date without a year, month or day: no Spark date
        raise ProtoValueError(
            f"google.type.Date {message.year}-{message.month}-{message.day}: {error}"
        ) from None


def _decimal(message: Any, *, scale: int, where: str) -> decimal.Decimal:
    unscaled = int.from_bytes(message.value, "big", signed=True)
    value = _EXACT.create_decimal(unscaled).scaleb(-message.scale, _EXACT)
    exact = value.quantize(decimal.Decimal(1).scaleb(-scale), context=_EXACT)
    if exact != value:
        raise ProtoValueError(f"{where}: {value} has more than the column's {scale} decimal places")
    return exact


# Writing --------------------------------------------------------------------------------------


def fill(message: Message, row: Mapping[str, Any]) -> Message:
    """Set a message's fields from a row (columns the message has not are an error)."""
    fields = message.DESCRIPTOR.fields_by_name
    for name, value in row.items():
        if value is None:
            continue
        field = fields.get(name)
        if field is None:
            raise ProtoValueError(f"message {message.DESCRIPTOR.full_name} has no field {name}")
        _set(message, field, value)
    return message


def _set(message: Message, field: FieldDescriptor, value: Any) -> None:
    name = field.name
    if protocolumns.is_map(field):
        entry = field.message_type.fields_by_name["value"]
        target = getattr(message, name)
        for key, item in value.items():
            if item is None:
                raise ProtoValueError(f"{field.full_name}: a map holds no null values")
            if entry.message_type is None:
                target[key] = _scalar(entry, item)
            else:
                _set_message(target[key], entry, item)
    elif field.is_repeated:
        target = getattr(message, name)
        for item in value:
            if item is None:
                raise ProtoValueError(f"{field.full_name}: a repeated field holds no nulls")
            if field.message_type is None:
                target.append(_scalar(field, item))
            else:
                _set_message(target.add(), field, item)
    elif field.message_type is None:
        setattr(message, name, _scalar(field, value))
    else:
        _set_message(getattr(message, name), field, value)


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM and isinstance(value, str):
        number = field.enum_type.values_by_name.get(value)
        if number is None:
            raise ProtoValueError(
                f"{field.full_name}: enum {field.enum_type.full_name} has no {value}"
            )
        return number.number
    if field.type in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return int(value)
    return value


def _set_message(target: Message, field: FieldDescriptor, value: Any) -> None:
    """Write one value into a (sub)message; touching it marks it present, even when empty."""
    kind = target.DESCRIPTOR.full_name
    target.SetInParent()
    if kind == protocolumns.TIMESTAMP:
        instant = value if value.tzinfo else value.replace(tzinfo=datetime.UTC)
        delta = instant - _EPOCH
        target.seconds = delta.days * 86_400 + delta.seconds
        target.nanos = delta.microseconds * 1000
    elif kind == protocolumns.DATE:
        target.year, target.month, target.day = value.year, value.month, value.day
    elif kind in protocolumns.WRAPPERS:
        target.value = _scalar(target.DESCRIPTOR.fields_by_name["value"], value)
    elif kind == protocolumns.DECIMAL:
        sign, digits, exponent = decimal.Decimal(value).as_tuple()
        if not isinstance(exponent, int):
            raise ProtoValueError(f"{field.full_name}: {value} is not a finite decimal")
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        target.value = _twos_complement(unscaled)
        target.precision = len(digits)
        target.scale = -exponent
    elif kind in protocolumns.JSON_MESSAGES:
        json_format.Parse(value, target)
    else:
        fill(target, value)


def _twos_complement(unscaled: int) -> bytes:
    """The shortest big-endian two's complement of an integer, as Java's
    BigInteger.toByteArray (which Confluent's serializers write): -128 is one byte."""
    bits = (unscaled if unscaled >= 0 else ~unscaled).bit_length() + 1  # one more: the sign
    return unscaled.to_bytes(max(1, (bits + 7) // 8), "big", signed=True)
