"""Avro schemas the driver derives: an output's from its columns, an input's reader with a
marker field (pure).

A derived schema is what Kafka Connect and ksqlDB would write for the same columns: nullable
columns are unions of null first with a null default, so adding a nullable column later stays
compatible under the registry's default rule (BACKWARD). Spark's own derivation puts null
last, without a default, which makes every added column an incompatible change.

The marker: spark-avro's PERMISSIVE mode turns a payload it cannot decode into a struct of
NULLs, which a record of all-null fields also is. The reader schema gets one more field, a
boolean that defaults to true: writers never have it, so every record that decodes has it
true, and only an undecodable payload leaves it NULL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

DECODED_MARKER = "__rillet_decoded"
AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PRIMITIVES = {
    "string": "string",
    "binary": "bytes",
    "boolean": "boolean",
    "byte": "int",
    "short": "int",
    "integer": "int",
    "long": "long",
    "float": "float",
    "double": "double",
}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


class AvroSchemaError(ValueError):
    """Columns that no Avro schema can hold as they are (the message says what to change)."""


def record_name(text: str) -> str:
    """An Avro name made from a topic or column name: other characters become underscores."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return name if AVRO_NAME.match(name) else f"_{name}"


def derive(
    struct: Mapping[str, Any], columns: Sequence[str], *, name: str, what: str
) -> dict[str, Any]:
    """The Avro record schema of `columns` of a Spark struct type (`StructType.jsonValue()`)."""
    by_name = {field["name"]: field for field in struct["fields"]}
    fields = [_field(by_name[column], path=(name,), what=what) for column in columns]
    return {"type": "record", "name": name, "namespace": "rillet", "fields": fields}


def _field(field: Mapping[str, Any], *, path: tuple[str, ...], what: str) -> dict[str, Any]:
    column = field["name"]
    if not AVRO_NAME.match(column):
        raise AvroSchemaError(
            f"{what}: column {column!r} is not an Avro field name (letters, digits and _, not "
            f"starting with a digit): give it an alias in the pipeline"
        )
    avro = _type(field["type"], path=(*path, column), what=what)
    if field.get("nullable", True):
        return {"name": column, "type": ["null", avro], "default": None}
    return {"name": column, "type": avro}


def _type(spark: Any, *, path: tuple[str, ...], what: str) -> Any:
    if isinstance(spark, str):
        return _simple(spark, what=what, where=".".join(path[1:]))
    kind = spark["type"]
    if kind == "struct":
        fields = [_field(f, path=path, what=what) for f in spark["fields"]]
        return {"type": "record", "name": "_".join(path), "fields": fields}
    if kind == "array":
        items = _type(spark["elementType"], path=path, what=what)
        return {"type": "array", "items": _nullable(items, spark.get("containsNull", True))}
    if kind == "map" and spark["keyType"] == "string":
        values = _type(spark["valueType"], path=path, what=what)
        return {"type": "map", "values": _nullable(values, spark.get("valueContainsNull", True))}
    raise AvroSchemaError(
        f"{what}: column {'.'.join(path[1:])} is a {kind} Avro cannot hold (maps need string "
        f"keys): convert it in the pipeline"
    )


def _nullable(avro: Any, nullable: bool) -> Any:
    return ["null", avro] if nullable else avro


def _simple(spark: str, *, what: str, where: str) -> Any:
    if spark in _PRIMITIVES:
        return _PRIMITIVES[spark]
    decimal = _DECIMAL.match(spark)
    if decimal:
        precision, scale = int(decimal.group(1)), int(decimal.group(2))
        return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}
    if spark == "timestamp":
        return {"type": "long", "logicalType": "timestamp-micros"}
    if spark == "timestamp_ntz":
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    if spark == "date":
        return {"type": "int", "logicalType": "date"}
    raise AvroSchemaError(
        f"{what}: column {where} is of type {spark}, which Avro cannot hold: cast it in the "
        f"pipeline (e.g. to STRING)"
    )


def field_names(schema: str) -> list[str]:
    """The top-level field names of an Avro record schema (JSON)."""
    return [field["name"] for field in json.loads(schema)["fields"]]


def with_decoded_marker(reader: str) -> str:
    """The reader schema with the marker field (see the module's docstring)."""
    schema = json.loads(reader)
    marker = {"name": DECODED_MARKER, "type": "boolean", "default": True}
    schema["fields"] = [*schema["fields"], marker]
    return json.dumps(schema, separators=(",", ":"))


def canonical(schema: Mapping[str, Any]) -> str:
    """A schema as compact JSON (what is registered and given to Spark)."""
    return json.dumps(schema, separators=(",", ":"))
