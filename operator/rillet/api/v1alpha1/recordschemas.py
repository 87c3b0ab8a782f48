"""Schemas of registry-encoded records: where an Avro key's or value's schema comes from.

Avro records are in the Confluent wire format (a zero byte, the 4-byte id of the writer's schema
in the schema registry, then the Avro payload), so every Avro input and output needs the
operator's schema registry (chart value `schemaRegistry.url`). What differs is the schema the
App reads into, or writes with:
- inline (`schema`): the Avro JSON given here;
- from the registry: a version of a subject (`subject`, `version`), by default the latest
  version of `<topic>-value` (or `-key`): Confluent's TopicNameStrategy, as its serializers use.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from rillet.api.v1alpha1 import fields, objects, rules

# Confluent's and Apicurio's subjects are free text; a Kafka topic name plus "-value" fits.
SUBJECT_MAX_LENGTH = 255
SUBJECT_PATTERN = r"^[^\x00-\x1f]+$"
# Avro schemas of real topics run to tens of kilobytes; the apiserver keeps objects under 1.5 MB.
SCHEMA_MAX_LENGTH = 262144


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
    subject: (
        Annotated[str, Field(min_length=1, max_length=SUBJECT_MAX_LENGTH, pattern=SUBJECT_PATTERN)]
        | None
    ) = Field(
        default=None,
        description="The registry subject: <topic>-value for values and <topic>-key for keys "
        "by default (TopicNameStrategy).",
    )
    version: Annotated[int, Field(ge=1, le=fields.INT32_MAX)] | None = Field(
        default=None,
        description="A version of the subject. Reading: the reader's schema (absent: the "
        "latest when the App starts). Writing: encode with this registered version and "
        "register nothing (absent: register the schema, or find it registered).",
    )
