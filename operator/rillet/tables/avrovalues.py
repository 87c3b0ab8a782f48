"""A Table's Avro values as JSON, for `rillet table get` and `--watch` (and Table servers).

A value is in the Confluent wire format: confluent-kafka's own AvroDeserializer decodes it with
the writer's schema its id names in the registry (asked once per id, then cached by the
client), so every version a Table was written with prints as it was written. Avro types JSON
has no word for print as text: decimals exactly (`"12.50"`), timestamps and dates in ISO 8601,
bytes in base64.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import uuid
from collections.abc import Mapping
from typing import Any, Final

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError

from rillet.tables import registryvalues

_NOT_FOUND: Final = 404


class AvroValueError(registryvalues.UndecodableValueError):
    """A value that is not in the wire format, names an id the registry lacks, or is corrupt."""


def json_ready(value: Any) -> Any:
    """A decoded Avro datum with every part JSON can hold (see the module's docstring)."""
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


class AvroValues:
    """Decodes one topic's Avro values with the schemas of a registry."""

    def __init__(self, registry_config: Mapping[str, Any], topic: str) -> None:
        self._client = SchemaRegistryClient(dict(registry_config))
        self._deserializer = AvroDeserializer(self._client)
        self._context = SerializationContext(topic, MessageField.VALUE)

    def decoded(self, data: bytes) -> Any:
        """The value as JSON-ready data; raises AvroValueError saying why it does not decode.

        A registry that does not answer raises its own error: that is not the value's fault.
        """
        try:
            return json_ready(self._deserializer(data, self._context))
        except SerializationError as error:
            raise AvroValueError(str(error)) from None
        except SchemaRegistryError as error:
            if error.http_status_code != _NOT_FOUND:
                raise
            raise AvroValueError(f"its schema id is not in the registry ({error})") from None
        except (EOFError, ValueError, IndexError, StopIteration) as error:  # fastavro's, corrupt
            raise AvroValueError(f"the payload does not decode ({error!r})") from None

    def text(self, data: bytes) -> str:
        """The value as compact JSON text; an undecodable one as a sentence in angle brackets."""
        try:
            return json.dumps(self.decoded(data), separators=(",", ":"))
        except AvroValueError as error:
            return f"<undecodable avro value: {error}>"

    def close(self) -> None:
        """Close the registry client's connections."""
        self._client.close()
