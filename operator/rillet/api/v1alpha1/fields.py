"""Field types shared by the kinds: names, durations, quantities, references and formats.

Each type is an `Annotated` alias carrying its constraints, so the constraint appears once and
both pydantic and the generated CRD schema enforce it. Patterns are written in the subset of
regular expressions that RE2 (the apiserver) and pydantic's regex engine read the same way.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Literal

from pydantic import Field, StrictInt, StrictStr, WithJsonSchema

from rillet.api.v1alpha1 import objects, rules

# Integer bounds: every integer field of the API has both, so the apiserver refuses a number
# before it reaches code with fixed-width integers. Kafka's wire types are int32 (partition
# counts, its INT configs, the Kafka client's C ints) and int64 (its LONG configs such as
# retention.ms, offsets, lag); Kubernetes counts generations in int64.
INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
# The largest maximum a CRD can give an int64 field. The apiserver keeps a schema's bounds as
# float64 and turns them back into int64 to compare integers: 2**63 - 1 as a float64 is 2**63,
# which wraps to -2**63, and the apiserver then refuses the CRD (its defaults break the bound).
# 2**63 - 1024 is the largest float64 below 2**63. Numbers past int64 it refuses anyway (it
# reads them as floats, not integers); the 1,023 values in between must be written as strings
# where a string is allowed (a topic config's Long.MAX_VALUE: "9223372036854775807").
INT64_SCHEMA_MAX = 2**63 - 1024

# A partition count of a Kafka topic (int32 in Kafka's protocol).
Partitions = Annotated[int, Field(ge=1, le=INT32_MAX)]
# Counts and sizes reported in a status: int32 where Kafka or Kubernetes count in int32,
# int64 where they count in int64 (lag, generations).
Count32 = Annotated[int, Field(ge=0, le=INT32_MAX)]
Count64 = Annotated[int, Field(ge=0, le=INT64_SCHEMA_MAX)]

# Kafka topic names: 1..249 characters of [a-zA-Z0-9._-], and neither "." nor "..". A leading
# "_" is refused too: it marks internal topics (Kafka's __consumer_offsets and
# __transaction_state, a registry's _schemas, Connect's and Confluent's _-topics), which a
# tenant's object must never create, adopt, delete, read or write (issue 39).
KAFKA_TOPIC_NAME_PATTERN = r"^[a-zA-Z0-9._-]+$"
KAFKA_TOPIC_NAME_MAX_LENGTH = 249

KafkaTopicName = Annotated[
    str,
    Field(min_length=1, max_length=KAFKA_TOPIC_NAME_MAX_LENGTH, pattern=KAFKA_TOPIC_NAME_PATTERN),
    rules.Rule(
        rule="self != '.' && self != '..'",
        message="a Kafka topic name cannot be '.' or '..': pick a name with letters or digits",
        check=lambda name: name not in {".", ".."},
    ),
    rules.Rule(
        rule="!self.startsWith('_')",
        message="a Kafka topic name cannot start with '_': such names are internal topics "
        "(Kafka's __consumer_offsets, a schema registry's _schemas): pick a name that starts "
        "with a letter or digit",
        check=lambda name: not name.startswith("_"),
    ),
]

# A Kubernetes object name (DNS-1123 subdomain), as used by references to other objects.
OBJECT_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
ObjectName = Annotated[str, Field(min_length=1, max_length=253, pattern=OBJECT_NAME_PATTERN)]

# A SQL identifier usable without quoting: view names of inputs, result names of a pipeline.
SQL_IDENTIFIER_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
SqlIdentifier = Annotated[str, Field(min_length=1, max_length=128, pattern=SQL_IDENTIFIER_PATTERN)]

# A column name of a result (Spark accepts almost anything, quoted with backticks).
ColumnName = Annotated[str, Field(min_length=1, max_length=256)]

# A Spark SQL DDL schema string, such as "word STRING, count BIGINT". Spark parses it at start.
DdlSchema = Annotated[str, Field(min_length=1, max_length=16384)]

# Durations are Go duration strings restricted to whole numbers of ms, s, m and h ("90s",
# "1h30m"): the form CEL's duration() parses, so rules can compare them on the apiserver.
DURATION_PATTERN = r"^([0-9]+(ms|s|m|h))+$"
_DURATION_PART = re.compile(r"([0-9]+)(ms|s|m|h)")
_DURATION_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}

Duration = Annotated[str, Field(min_length=2, max_length=32, pattern=DURATION_PATTERN)]


# Go (and so CEL) durations are int64 nanoseconds: about 2562047 hours.
MAX_DURATION = timedelta(microseconds=(2**63 - 1) // 1000)


def parse_duration(text: str) -> timedelta:
    """The length of a duration string such as "1h30m" (see DURATION_PATTERN)."""
    if not re.fullmatch(DURATION_PATTERN, text):
        raise ValueError(f"not a duration: {text!r} (write e.g. 30s, 5m, 1h30m)")
    milliseconds = sum(
        int(amount) * _DURATION_UNIT_MS[unit] for amount, unit in _DURATION_PART.findall(text)
    )
    if milliseconds > MAX_DURATION // timedelta(milliseconds=1):
        raise ValueError(f"duration {text!r} is too long (at most {MAX_DURATION.days} days)")
    return timedelta(milliseconds=milliseconds)


def cel_durations_parse(*expressions: str) -> str:
    """CEL: every expression is a well-formed duration string.

    Rules that call duration() are guarded with this, so that a malformed value gets the
    pattern's error alone, not also a "type conversion error" from the rule.
    """
    return " && ".join(f"{e}.matches('{DURATION_PATTERN}')" for e in expressions)


def positive_duration(field: str) -> rules.Rule:
    """A rule on a Duration field: longer than zero."""
    return rules.Rule(
        rule=f"!({cel_durations_parse('self')}) || duration(self) > duration('0s')",
        message=f"{field} must be longer than 0s, e.g. 30s or 5m",
        check=lambda text: parse_duration(text) > timedelta(),
    )


# Kubernetes quantities, as in Pod resources: an integer, or a string such as "500m" or "2Gi".
CPU_PATTERN = r"^(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))m?$"
MEMORY_PATTERN = r"^(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[kMGTPE])?$"


# Integers as quantities: whole CPUs (int32, far beyond any node), bytes of memory (int64).
MAX_CPU_INTEGER = INT32_MAX
MAX_MEMORY_INTEGER = INT64_SCHEMA_MAX


def _quantity(pattern: str, example: str, *, maximum: int) -> WithJsonSchema:
    """Annotated metadata for an int-or-string quantity: a string `pattern`, an integer range
    (minimum and maximum apply to integers only, as pattern applies to strings only)."""
    return WithJsonSchema(
        {
            "x-kubernetes-int-or-string": True,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": pattern,
            "minimum": 0,
            "maximum": maximum,
            "description": f"An integer or a Kubernetes quantity string such as {example}.",
        }
    )


CpuQuantity = Annotated[
    Annotated[StrictInt, Field(ge=0, le=MAX_CPU_INTEGER)]
    | Annotated[StrictStr, Field(pattern=CPU_PATTERN)],
    _quantity(CPU_PATTERN, '"500m" or "2"', maximum=MAX_CPU_INTEGER),
]
MemoryQuantity = Annotated[
    Annotated[StrictInt, Field(ge=0, le=MAX_MEMORY_INTEGER)]
    | Annotated[StrictStr, Field(pattern=MEMORY_PATTERN)],
    _quantity(MEMORY_PATTERN, '"512Mi" or "2Gi"', maximum=MAX_MEMORY_INTEGER),
]

DeletionPolicy = Literal["Retain", "Delete"]
DELETION_POLICY_DESCRIPTION = (
    "What happens to the Kafka topic when this object is deleted: Retain (the default) keeps the "
    "topic and its data; Delete deletes the topic."
)
ConfigPolicy = Literal["Merge", "Replace"]
CONFIG_POLICY_DESCRIPTION = (
    "What happens to topic configs Kafka holds that spec.config does not declare: Replace "
    "removes them (drift correction: the topic holds exactly what is declared); Merge keeps them "
    "(a declared config is still set). Unset: Replace for a topic Rillet created (or managed "
    "before claims were recorded), Merge for an existing topic adopted with the annotation "
    "rillet.io/adopt=true, so that adopting never drops the retention its data depends on."
)

# How the bytes of a Kafka record key or value are read and written. Avro and Protobuf are in
# the Confluent wire format, with their schemas in the schema registry (recordschemas).
Format = Literal["json", "string", "bytes", "avro", "protobuf"]
# The formats of a Table's keys: lookups and Table servers find a key by its bytes, which an
# Avro key's schema id would make differ between writer and reader.
TableFormat = Literal["json", "string", "bytes"]
# The formats of a Table's values (Table servers and `rillet table get` print them as JSON).
TableValueFormat = Literal["json", "string", "bytes", "avro", "protobuf"]
# Formats whose one key or value holds several columns.
STRUCTURED_FORMATS = ("avro", "json", "protobuf")


class LocalObjectReference(objects.WireModel):
    """A reference to another Rillet object in the same namespace."""

    name: ObjectName = Field(description="Name of the referenced object (same namespace).")
