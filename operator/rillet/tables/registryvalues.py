"""What `rillet table get` and Table servers decode registry-encoded values with: a decoder of
one topic's values (Avro's in avrovalues, Protobuf's in runtime.queries.protojson, which needs
the compiler the runtime carries), and the error a value that does not decode raises."""

from __future__ import annotations

from typing import Any, Protocol


class UndecodableValueError(ValueError):
    """A value that is not in the wire format, names an id the registry lacks, or is corrupt."""


class RegistryValues(Protocol):
    """Decodes one topic's values in the Confluent wire format with a registry's schemas."""

    def decoded(self, data: bytes) -> Any:
        """The value as JSON-ready data; raises UndecodableValueError saying why it does not
        decode (a registry that does not answer raises its own error)."""

    def text(self, data: bytes) -> str:
        """The value as compact JSON text; an undecodable one as a sentence in angle brackets."""

    def close(self) -> None:
        """Close the registry client's connections."""
