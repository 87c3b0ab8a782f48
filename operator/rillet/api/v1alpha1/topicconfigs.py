"""The Kafka topic configs a Topic or Table may set, and how their values are checked.

The key list is Kafka 4.1's topic-level configs (`TopicConfig` and `LogConfig` in the Kafka
sources), without `message.downconversion.enable`, which is a no-op since Kafka 4.0.

Why values are "integer or string" (`x-kubernetes-int-or-string`): the apiserver needs a
structural schema, and a structural schema cannot say "string, integer, boolean or number" for a
map value. Its only escape hatch that keeps CEL rules working is int-or-string (a value marked
`x-kubernetes-preserve-unknown-fields` is hidden from CEL, so the key checks below could not run).
So integers may be written bare (`retention.ms: 604800000`), and booleans and decimals are written
as strings (`preallocate: "true"`, `min.cleanable.dirty.ratio: "0.5"`), as Kafka itself stores
them. Each key's value is checked against its Kafka type: whole numbers, decimals, "true"/"false",
or one of a fixed set of choices. A bare integer is also held to the width of its Kafka type: 64
bits for every value (the schema's minimum and maximum; see fields.INT64_SCHEMA_MAX for the top
1,023 values, Long.MAX_VALUE among them, which must be quoted), 32 bits for Kafka's INT
settings such as max.message.bytes (a rule). Kafka's own ranges (segment.bytes at least 1
MiB...), and numbers written as strings, are left to Kafka: its error lands in the status.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import Field, StrictInt, StrictStr, WithJsonSchema

from rillet.api.v1alpha1 import fields, rules

ValueKind = Literal["integer", "number", "boolean", "choice", "string"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class TopicConfigKey:
    """One Kafka topic config: its name, the kind of value it takes, and what it does."""

    name: str
    kind: ValueKind
    summary: str
    choices: tuple[str, ...] = ()
    # Integer settings: Kafka's type, LONG (64 bits) or INT (32 bits).
    bits: Literal[32, 64] = 64


KEYS: tuple[TopicConfigKey, ...] = (
    TopicConfigKey(
        name="cleanup.policy",
        kind="choice",
        choices=("compact", "delete", "compact,delete", "delete,compact"),
        summary="Retention policy: delete old segments, compact by key, or both.",
    ),
    TopicConfigKey(
        name="compression.gzip.level",
        kind="integer",
        bits=32,
        summary="Compression level when compression.type is gzip.",
    ),
    TopicConfigKey(
        name="compression.lz4.level",
        kind="integer",
        bits=32,
        summary="Compression level when compression.type is lz4.",
    ),
    TopicConfigKey(
        name="compression.type",
        kind="choice",
        choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        summary="Final compression codec of the topic's data.",
    ),
    TopicConfigKey(
        name="compression.zstd.level",
        kind="integer",
        bits=32,
        summary="Compression level when compression.type is zstd.",
    ),
    TopicConfigKey(
        name="delete.retention.ms",
        kind="integer",
        summary="How long tombstones are kept on compacted topics.",
    ),
    TopicConfigKey(
        name="file.delete.delay.ms",
        kind="integer",
        summary="Delay before a deleted segment file is removed from disk.",
    ),
    TopicConfigKey(
        name="flush.messages", kind="integer", summary="Messages between forced fsyncs of the log."
    ),
    TopicConfigKey(
        name="flush.ms", kind="integer", summary="Time between forced fsyncs of the log."
    ),
    TopicConfigKey(
        name="follower.replication.throttled.replicas",
        kind="string",
        summary="Replicas throttled on the follower side (partition:broker list or *).",
    ),
    TopicConfigKey(
        name="index.interval.bytes",
        kind="integer",
        bits=32,
        summary="Bytes between entries of the offset index.",
    ),
    TopicConfigKey(
        name="leader.replication.throttled.replicas",
        kind="string",
        summary="Replicas throttled on the leader side (partition:broker list or *).",
    ),
    TopicConfigKey(
        name="local.retention.bytes",
        kind="integer",
        summary="Bytes kept on local disk with tiered storage (-2: retention.bytes).",
    ),
    TopicConfigKey(
        name="local.retention.ms",
        kind="integer",
        summary="Time kept on local disk with tiered storage (-2: retention.ms).",
    ),
    TopicConfigKey(
        name="max.compaction.lag.ms",
        kind="integer",
        summary="Longest time a record stays ineligible for compaction.",
    ),
    TopicConfigKey(
        name="max.message.bytes",
        kind="integer",
        bits=32,
        summary="Largest record batch the topic accepts.",
    ),
    TopicConfigKey(
        name="message.timestamp.after.max.ms",
        kind="integer",
        summary="How far in the future a record's timestamp may be.",
    ),
    TopicConfigKey(
        name="message.timestamp.before.max.ms",
        kind="integer",
        summary="How far in the past a record's timestamp may be.",
    ),
    TopicConfigKey(
        name="message.timestamp.type",
        kind="choice",
        choices=("CreateTime", "LogAppendTime"),
        summary="Whether record timestamps are set by producers or by the broker.",
    ),
    TopicConfigKey(
        name="min.cleanable.dirty.ratio",
        kind="number",
        summary="Share of uncompacted log (0 to 1) that triggers compaction.",
    ),
    TopicConfigKey(
        name="min.compaction.lag.ms",
        kind="integer",
        summary="Shortest time a record stays uncompacted.",
    ),
    TopicConfigKey(
        name="min.insync.replicas",
        kind="integer",
        bits=32,
        summary="Replicas that must acknowledge a write with acks=all.",
    ),
    TopicConfigKey(
        name="preallocate", kind="boolean", summary="Preallocate segment files on disk."
    ),
    TopicConfigKey(
        name="remote.log.copy.disable",
        kind="boolean",
        summary="Stop copying segments to tiered storage (data becomes read-only).",
    ),
    TopicConfigKey(
        name="remote.log.delete.on.disable",
        kind="boolean",
        summary="Delete tiered data when tiered storage is turned off.",
    ),
    TopicConfigKey(
        name="remote.storage.enable", kind="boolean", summary="Enable tiered storage for the topic."
    ),
    TopicConfigKey(
        name="retention.bytes",
        kind="integer",
        summary="Largest size of a partition before old segments are deleted.",
    ),
    TopicConfigKey(
        name="retention.ms", kind="integer", summary="How long records are kept (-1: forever)."
    ),
    TopicConfigKey(
        name="segment.bytes", kind="integer", bits=32, summary="Size of a log segment file."
    ),
    TopicConfigKey(
        name="segment.index.bytes",
        kind="integer",
        bits=32,
        summary="Size of a segment's offset index.",
    ),
    TopicConfigKey(
        name="segment.jitter.ms",
        kind="integer",
        summary="Random jitter subtracted from segment.ms.",
    ),
    TopicConfigKey(
        name="segment.ms",
        kind="integer",
        summary="Time after which a segment is rolled even if not full.",
    ),
    TopicConfigKey(
        name="unclean.leader.election.enable",
        kind="boolean",
        summary="Allow out-of-sync replicas to become leader (may lose data).",
    ),
)

BY_NAME: Mapping[str, TopicConfigKey] = {key.name: key for key in KEYS}
KNOWN_KEYS = frozenset(BY_NAME)
MAX_VALUE_LENGTH = 8192

# Strings accepted for integer and decimal settings (Kafka parses them the same way).
INTEGER_PATTERN = r"^-?[0-9]+$"
NUMBER_PATTERN = r"^-?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$"
BOOLEAN_STRINGS = ("true", "false")

ConfigValue = Annotated[
    Annotated[StrictInt, Field(ge=fields.INT64_MIN, le=fields.INT64_SCHEMA_MAX)]
    | Annotated[StrictStr, Field(max_length=MAX_VALUE_LENGTH)],
    WithJsonSchema(
        {
            "x-kubernetes-int-or-string": True,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "maxLength": MAX_VALUE_LENGTH,
            "minimum": fields.INT64_MIN,
            "maximum": fields.INT64_SCHEMA_MAX,
            "description": "The value: an integer, or a string for every other Kafka type.",
        }
    ),
]


def names_of(kind: ValueKind) -> tuple[str, ...]:
    """The config names whose values are of `kind`, in KEYS order."""
    return tuple(key.name for key in KEYS if key.kind == kind)


def value_fits(key: TopicConfigKey, value: int | str) -> bool:
    """Whether `value` is a valid value of `key`'s Kafka type (what the CEL rules check)."""
    match key.kind:
        case "integer":
            return isinstance(value, int) or re.fullmatch(INTEGER_PATTERN, value) is not None
        case "number":
            return isinstance(value, int) or re.fullmatch(NUMBER_PATTERN, value) is not None
        case "boolean":
            return value in BOOLEAN_STRINGS
        case "choice":
            return isinstance(value, str) and value in key.choices
        case "string":
            return isinstance(value, str)


def names_of_width(bits: Literal[32, 64]) -> tuple[str, ...]:
    """The integer config names Kafka types with `bits` bits (INT: 32, LONG: 64), in KEYS order."""
    return tuple(key.name for key in KEYS if key.kind == "integer" and key.bits == bits)


def in_range(key: TopicConfigKey, value: int | str) -> bool:
    """Whether a bare integer of an INT setting fits 32 bits. LONG settings are held to 64 bits by
    the schema's bounds; strings, and the ranges Kafka sets within a width, are Kafka's to
    check."""
    if key.kind != "integer" or key.bits != 32 or isinstance(value, str):
        return True
    return fields.INT32_MIN <= value <= fields.INT32_MAX


def _unknown(config: Mapping[str, object]) -> list[str]:
    return [name for name in config if name not in KNOWN_KEYS]


def _misfits(config: Mapping[str, int | str], kind: ValueKind) -> list[str]:
    return [
        name
        for name in names_of(kind)
        if name in config and not value_fits(BY_NAME[name], config[name])
    ]


_KNOWN = rules.cel_list(KNOWN_KEYS)

_UNKNOWN_ADVICE = (
    "is not a Kafka topic config: use topic-level names such as retention.ms or cleanup.policy "
    "(not broker names such as log.retention.ms)"
)
UNKNOWN_KEYS_RULE = rules.every_key(
    passes=f"k in {_KNOWN}",
    fails=f"!(k in {_KNOWN})",
    failing=_unknown,
    message=f"config has a key that {_UNKNOWN_ADVICE}",
    lead="config key ",
    tail=f" {_UNKNOWN_ADVICE}",
)

# CEL for "the value of key k fits its kind" (k bound by the enclosing macro).
_FITS_CEL: Mapping[ValueKind, str] = {
    "integer": f"type(self[k]) == int || self[k].matches('{INTEGER_PATTERN}')",
    "number": f"type(self[k]) == int || self[k].matches('{NUMBER_PATTERN}')",
    "boolean": f"type(self[k]) == string && self[k] in {rules.cel_list(BOOLEAN_STRINGS)}",
    "string": "type(self[k]) == string",
}
# What a value of each kind must be, and a well-known setting of that kind.
_KIND_ADVICE: Mapping[ValueKind, tuple[str, str]] = {
    "integer": ('a whole number, such as 604800000 or "604800000"', "retention.ms"),
    "number": ('a number, such as 1 or "0.5" (decimals quoted)', "min.cleanable.dirty.ratio"),
    "boolean": (
        'the string "true" or "false" (quoted: config values are integers or strings)',
        "preallocate",
    ),
    "string": ("a string", "leader.replication.throttled.replicas"),
}


def _kind_rule(kind: ValueKind) -> rules.Rule:
    names = rules.cel_list(names_of(kind))
    fits = _FITS_CEL[kind]
    advice, example = _KIND_ADVICE[kind]
    return rules.Rule(
        rule=f"{names}.all(k, !(k in self) || {fits})",
        message=f"config: {kind} settings such as {example} need {advice}",
        message_expression=(
            f"'config ' + {names}.filter(k, k in self && !({fits}))[0] + "
            f"{rules.cel_string(' needs ' + advice)}"
        ),
        check=lambda config: not _misfits(config, kind),
        explain=lambda config: f"config {_misfits(config, kind)[0]} needs {advice}",
    )


def _choice_rule(key: TopicConfigKey) -> rules.Rule:
    choices = ", ".join(key.choices)
    return rules.Rule(
        rule=f"!('{key.name}' in self) || (type(self['{key.name}']) == string && "
        f"self['{key.name}'] in {rules.cel_list(key.choices)})",
        message=f"config {key.name} must be one of: {choices}",
        check=lambda config: key.name not in config or value_fits(key, config[key.name]),
    )


def _out_of_range(config: Mapping[str, int | str]) -> list[str]:
    return [name for name in names_of_width(32) if not in_range(BY_NAME[name], config.get(name, 0))]


_INT32 = rules.cel_list(names_of_width(32))
_INT32_FITS = (
    f"type(self[k]) != int || (self[k] >= {fields.INT32_MIN} && self[k] <= {fields.INT32_MAX})"
)
_INT32_ADVICE = (
    f"is a 32-bit integer in Kafka (INT): use a value from {fields.INT32_MIN} to {fields.INT32_MAX}"
)
INT32_RANGE_RULE = rules.Rule(
    rule=f"{_INT32}.all(k, !(k in self) || {_INT32_FITS})",
    message=f"config: a setting such as max.message.bytes {_INT32_ADVICE}",
    message_expression=(
        f"'config ' + {_INT32}.filter(k, k in self && !({_INT32_FITS}))[0] + "
        f"{rules.cel_string(' ' + _INT32_ADVICE)}"
    ),
    check=lambda config: not _out_of_range(config),
    explain=lambda config: f"config {_out_of_range(config)[0]} {_INT32_ADVICE}",
)

VALUE_RULES: tuple[rules.Rule, ...] = (
    *(_kind_rule(kind) for kind in ("integer", "number", "boolean", "string")),
    INT32_RANGE_RULE,
    *(_choice_rule(key) for key in KEYS if key.kind == "choice"),
)

CONFIG_DESCRIPTION = (
    "Kafka topic configs to set on the topic, by Kafka name (e.g. retention.ms, "
    "cleanup.policy). Integers may be written bare; booleans and decimals as strings "
    '("true", "0.5"). Keys not listed here keep the broker\'s defaults; keys removed from '
    "here are reset to them."
)

TopicConfig = Annotated[
    dict[str, ConfigValue],
    Field(max_length=len(KEYS)),
    rules.RuleSet((UNKNOWN_KEYS_RULE, *VALUE_RULES)),
]
