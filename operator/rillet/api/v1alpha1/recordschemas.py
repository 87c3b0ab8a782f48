"""Schemas of registry-encoded records: where an Avro or Protobuf key's or value's schema
comes from.

Both are in the Confluent wire format (a zero byte, the 4-byte id of the writer's schema in the
schema registry, then the payload; Protobuf's starts with the message's indexes), so every such
input and output needs the operator's schema registry (chart value `schemaRegistry.url`). What
differs is the schema the App reads into, or writes with:
- inline (`schema`): the Avro JSON, or the `.proto` text and the `message` of it, given here;
- from the registry: a version of a subject (`subject`, `version`), by default the latest
  version of `<topic>-value` (or `-key`): Confluent's TopicNameStrategy, as its serializers use.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field
from pydantic.alias_generators import to_snake

from rillet.api.v1alpha1 import fields, objects, rules

# Confluent's and Apicurio's subjects are free text; a Kafka topic name plus "-value" fits.
SUBJECT_MAX_LENGTH = 255
SUBJECT_PATTERN = r"^[^\x00-\x1f]+$"
# Avro schemas of real topics run to tens of kilobytes; the apiserver keeps objects under 1.5 MB.
SCHEMA_MAX_LENGTH = 262144
# A Protobuf message's full name: its package and enclosing messages, dot-separated.
MESSAGE_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"

Subject = Annotated[
    str, Field(min_length=1, max_length=SUBJECT_MAX_LENGTH, pattern=SUBJECT_PATTERN)
]
Version = Annotated[int, Field(ge=1, le=fields.INT32_MAX)]
SUBJECT_DESCRIPTION = (
    "The registry subject: <topic>-value for values and <topic>-key for keys by default "
    "(TopicNameStrategy)."
)
VERSION_DESCRIPTION = (
    "A version of the subject. Reading: the reader's schema (absent: the latest when the App "
    "starts). Writing: encode with this registered version and register nothing (absent: "
    "register the schema, or find it registered)."
)


def only_for_format(field: str, *, format_field: str, fmt: str, message: str) -> rules.Rule:
    """A model-level rule: the wire field `field` (a schema's source) is set only when
    `format_field` is `fmt`."""
    attribute, format_attribute = to_snake(field), to_snake(format_field)
    return rules.Rule(
        rule=f"!has(self.{field}) || (has(self.{format_field}) && self.{format_field} == '{fmt}')",
        message=message,
        field_path=f".{field}",
        check=lambda m: getattr(m, attribute) is None or getattr(m, format_attribute) == fmt,
    )


class AvroSchema(objects.WireModel):
    """The Avro schema of a key or value: inline, or a version of a registry subject.

    Reading, it is the reader's schema: each record is decoded with the schema its id names in
    the registry (the writer's) and resolved into this one, so records written with older
    compatible versions read as this one (fields it adds take their defaults). Writing, records
    are encoded with it (absent: a schema derived from the output's columns), registered under
    the subject unless `version` names a registered one.
    """

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.Rule(
            rule="!has(self.schema) || !has(self.version)",
            message="give the Avro schema inline (schema) or name a registered version "
            "(version), not both: remove one",
            field_path=".version",
            check=lambda s: s.schema_ is None or s.version is None,
        ),
    )

    schema_: Annotated[str, Field(min_length=2, max_length=SCHEMA_MAX_LENGTH)] | None = Field(
        default=None,
        alias="schema",
        description='The schema as Avro JSON, a record: {"type": "record", "name": ..., '
        '"fields": [...]}. Absent: the subject\'s version (reading), or a schema derived from '
        "the columns (writing).",
    )
    subject: Subject | None = Field(default=None, description=SUBJECT_DESCRIPTION)
    version: Version | None = Field(default=None, description=VERSION_DESCRIPTION)


class ProtobufSchema(objects.WireModel):
    """The Protobuf schema of a key or value: inline, or a version of a registry subject.

    Reading, it is the reader's schema and message: each record's schema id and message indexes
    say which message of which registered schema wrote it, which must be the reader's message
    (by name); its payload is parsed as the reader's message (Protobuf's evolution: by field
    number, fields the reader lacks skipped, fields the writer lacked at their default).
    Writing, records are encoded as the message (absent: one derived from the output's
    columns), registered under the subject unless `version` names a registered one.
    """

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.Rule(
            rule="!has(self.schema) || !has(self.version)",
            message="give the Protobuf schema inline (schema) or name a registered version "
            "(version), not both: remove one",
            field_path=".version",
            check=lambda s: s.schema_ is None or s.version is None,
        ),
        rules.Rule(
            rule="!has(self.schema) || has(self.message)",
            message="an inline Protobuf schema needs the message read or written: set message "
            "to its full name, e.g. shop.v1.Order",
            field_path=".message",
            reason="FieldValueRequired",
            check=lambda s: s.schema_ is None or s.message is not None,
        ),
    )

    schema_: Annotated[str, Field(min_length=1, max_length=SCHEMA_MAX_LENGTH)] | None = Field(
        default=None,
        alias="schema",
        description="The schema as the text of a .proto file (proto2 or proto3); it may import "
        "the well-known types (google/protobuf/*.proto, google/type/*.proto, confluent/*.proto). "
        "Absent: the subject's version (reading), or a schema derived from the columns "
        "(writing).",
    )
    message: Annotated[str, Field(max_length=512, pattern=MESSAGE_NAME_PATTERN)] | None = Field(
        default=None,
        description="The message's full name (package and enclosing messages), e.g. "
        "shop.v1.Order. Required with schema; absent: the schema's first message, as "
        "Confluent's serializers take it.",
    )
    subject: Subject | None = Field(default=None, description=SUBJECT_DESCRIPTION)
    version: Version | None = Field(default=None, description=VERSION_DESCRIPTION)
