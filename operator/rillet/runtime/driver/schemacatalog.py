"""The driver's view of the schema registry: the Avro and Protobuf schemas its queries are
planned with.

At start, each Avro input's reader schema is fixed (inline, a version of its subject, or the
latest), and the writer schemas it decodes are those of every version of its subject. A record
of another id stops its query (avrorecords.UNKNOWN_ID_MARKER); `learn` asks the registry for
that id, and the driver plans the queries again. Each output's Avro key and value schema is
registered under its subject (or a registered version taken), once per driver. Protobuf's
inputs and outputs are protocatalog's, the same way; both ask the registry through
registryasking (retried while it is away; its refusals stall the App).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any, Literal

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from rillet.driverapi import runspecs
from rillet.reconcile import protospecs
from rillet.runtime.driver import protocatalog, registryasking
from rillet.runtime.queries import avrorecords, avroschemas, protorecords, records

log = logging.getLogger(__name__)

AVRO = registryasking.AVRO
SchemaRegistryRefusedError = registryasking.SchemaRegistryRefusedError
client_config = registryasking.client_config


class SchemaCatalog:
    """The Avro and Protobuf schemas of one App's queries, as the registry gave them."""

    def __init__(
        self, client: SchemaRegistryClient, *, stop: threading.Event | None = None
    ) -> None:
        self._registry = registryasking.Registry(client, stop=stop)
        self._readings: dict[str, avrorecords.AvroReading] = {}
        self._writings: dict[tuple[str, str], records.AvroWriting] = {}
        self.protobuf = protocatalog.ProtoCatalog(self._registry)

    @classmethod
    def for_spec(
        cls, spec: runspecs.RunSpec, *, stop: threading.Event | None = None
    ) -> SchemaCatalog | None:
        """The App's catalog, None when it has neither Avro nor Protobuf."""
        if not protospecs.uses_registry(spec.inputs, spec.outputs):
            return None
        if spec.schema_registry is None:
            raise SchemaRegistryRefusedError(
                "the App reads or writes avro or protobuf, and its run spec names no schema "
                "registry"
            )
        return cls(SchemaRegistryClient(client_config(spec.schema_registry)), stop=stop)

    def close(self) -> None:
        """Release the client's connections."""
        self._registry.close()

    # Reading --------------------------------------------------------------------------------

    def readings(self, spec: runspecs.RunSpec) -> dict[str, avrorecords.AvroReading]:
        """How each Avro input is decoded now (its reader fixed at the first call)."""
        for item in spec.inputs:
            if item.avro is not None and item.name not in self._readings:
                self._readings[item.name] = self._first_reading(item.name, item.avro)
        return dict(self._readings)

    def proto_readings(self, spec: runspecs.RunSpec) -> dict[str, protorecords.ProtoReading]:
        """How each Protobuf input is decoded now (its reader fixed at the first call)."""
        return self.protobuf.readings(spec)

    def _first_reading(self, name: str, avro: runspecs.AvroSpec) -> avrorecords.AvroReading:
        writers = {
            number: (registered.schema_id, registered.text)
            for number, registered in self._registry.versions(avro.subject, AVRO).items()
        }
        if avro.inline_schema is not None:
            reader = avro.inline_schema
        elif not writers:
            raise SchemaRegistryRefusedError(
                f"input {name}: subject {avro.subject} has no schema in the registry: register "
                f"one (a producer's serializer does on its first record), or give the input's "
                f"reader schema inline (avro.schema)"
            )
        elif avro.version is not None:
            reader = self._registry.version(name, avro.subject, avro.version).text
        else:
            reader = writers[max(writers)][1]
        log.info("input %s reads %s with %d writer schemas", name, avro.subject, len(writers))
        return avrorecords.AvroReading(
            reader=reader, writers={schema_id: text for schema_id, text in writers.values()}
        )

    def learn(self, ids: Mapping[str, set[int]]) -> None:
        """Ask the registry for the schema ids an input's records carry and its query did not
        know: each is a writer's schema, or unknown."""
        for name, schema_ids in ids.items():
            if self.protobuf.reads(name):
                self.protobuf.learn(name, schema_ids)
                continue
            reading = self._readings[name]
            writers, unknown = dict(reading.writers), set(reading.unknown)
            for schema_id in schema_ids:
                schema = self._registry.schema(schema_id, AVRO)
                if schema is None:
                    unknown.add(schema_id)
                else:
                    writers[schema_id] = schema.schema_str or ""
                known = "not in the registry" if schema is None else "learned"
                log.info("input %s: schema id %d %s", name, schema_id, known)
            self._readings[name] = avrorecords.AvroReading(
                reader=reading.reader, writers=writers, unknown=frozenset(unknown)
            )

    # Writing --------------------------------------------------------------------------------

    def encodings(
        self, output: runspecs.OutputSpec, struct: Mapping[str, Any]
    ) -> records.AvroEncodings:
        """An output's Avro key and value schemas, registered (or taken registered) for a
        result of Spark type `struct` (`StructType.jsonValue()`)."""
        keys, values = records.record_columns(output, [f["name"] for f in struct["fields"]])
        key = value = None
        if output.key_avro is not None and keys:
            key = self._writing(output, "key", output.key_avro, struct, keys)
        if output.value_avro is not None:
            value = self._writing(output, "value", output.value_avro, struct, values)
        return records.AvroEncodings(key=key, value=value)

    def proto_encodings(
        self, output: runspecs.OutputSpec, struct: Mapping[str, Any]
    ) -> protorecords.ProtoEncodings:
        """An output's Protobuf key and value schemas (protocatalog.ProtoCatalog.encodings)."""
        return self.protobuf.encodings(output, struct)

    def _writing(
        self,
        output: runspecs.OutputSpec,
        part: Literal["key", "value"],
        avro: runspecs.AvroSpec,
        struct: Mapping[str, Any],
        columns: tuple[str, ...],
    ) -> records.AvroWriting:
        cached = self._writings.get((output.id, part))
        if cached is not None:
            return cached
        where = f"output {output.id}: {part}"
        if avro.version is not None:
            registered = self._registry.version(where, avro.subject, avro.version)
            writing = records.AvroWriting(registered.schema_id, registered.text)
        else:
            schema = avro.inline_schema or avroschemas.canonical(
                avroschemas.derive(
                    struct,
                    columns,
                    name=avroschemas.record_name(f"{output.topic}_{part}"),
                    what=where,
                )
            )
            schema_id = self._registry.register(
                where,
                avro.subject,
                Schema(schema, AVRO),
                advice="Make the change compatible with the subject's versions (new fields "
                "need defaults), or write to another subject",
            )
            writing = records.AvroWriting(schema_id, schema)
        self._writings[(output.id, part)] = writing
        return writing
