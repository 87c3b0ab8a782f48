"""An Avro order schema and record with what trips encoders up: a nested record, an array, a
null, a decimal and a timestamp (the schema registry's and the Avro runtime's tests)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

ORDER_V1: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "rillet.test",
    "fields": [
        {"name": "id", "type": "long"},
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {
            "name": "address",
            "type": {
                "type": "record",
                "name": "Address",
                "fields": [{"name": "city", "type": "string"}],
            },
        },
    ],
}
ORDER = {
    "id": 7,
    "amount": Decimal("12.34"),
    "at": datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
    "tags": ["a", "b"],
    "note": None,
    "address": {"city": "Oslo"},
}
# ORDER as `rillet table get` and Table servers print it (tables.avrovalues): decimals as exact
# strings, timestamps in ISO 8601.
ORDER_JSON = {
    "id": 7,
    "amount": "12.34",
    "at": "2026-01-02T03:04:05.678000+00:00",
    "tags": ["a", "b"],
    "note": None,
    "address": {"city": "Oslo"},
}


def with_field(schema: dict[str, Any], field: dict[str, Any]) -> str:
    """The schema, as JSON, with one more field."""
    return json.dumps({**schema, "fields": [*schema["fields"], field]})
