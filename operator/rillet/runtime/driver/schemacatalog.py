"""The driver's view of the schema registry: the Avro schemas its queries are planned with.

At start, each Avro input's reader schema is fixed (inline, a version of its subject, or the
latest), and the writer schemas it decodes are those of every version of its subject. A record
of another id stops its query (avrorecords.UNKNOWN_ID_MARKER); `learn` asks the registry for
that id, and the driver plans the queries again. Each output's Avro key and value schema is
registered under its subject (or a registered version taken), once per driver.

A registry that cannot be reached (or answers 5xx) is asked again with backoff, for as long
as it takes, never taken for an answer. Its refusals are the App's to fix: an incompatible
schema or a missing subject or version raises terminations.SchemaRegistryRefusedError, which
the operator shows as the App's Stalled condition. Credentials come from the files of the
Secret the operator mounts (run spec `schema_registry.credentials_dir`), or, for a local
`rillet run`, from RILLET_SCHEMA_REGISTRY_USERNAME and _PASSWORD; never from the run spec.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import tenacity
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from rillet.driverapi import runspecs, terminations
from rillet.reconcile import avrospecs
from rillet.runtime.queries import avrorecords, avroschemas, records

log = logging.getLogger(__name__)

USERNAME_ENV = "RILLET_SCHEMA_REGISTRY_USERNAME"
PASSWORD_ENV = "RILLET_SCHEMA_REGISTRY_PASSWORD"
# HTTP statuses that are answers about the request (not found, refused, invalid), not outages.
_NOT_FOUND = 404
AVRO = "AVRO"

SchemaRegistryRefusedError = terminations.SchemaRegistryRefusedError


def _outage(error: BaseException) -> bool:
    """Whether an error means the registry is away (ask again), not that it answered."""
    if isinstance(error, SchemaRegistryError):
        return error.http_status_code >= 500 or error.http_status_code in (408, 429)
    return isinstance(error, (OSError, ConnectionError)) or type(error).__module__.startswith(
        "httpx"
    )


def client_config(registry: runspecs.SchemaRegistry) -> dict[str, Any]:
    """The registry client's settings, credentials included (never logged)."""
    # Without a timeout, a request the registry took but never answered waited forever (seen
    # with Apicurio: its log has the answer, the client never got it); a timeout is retried.
    config: dict[str, Any] = {"url": registry.url, "timeout": registry.request_timeout_seconds}
    if registry.credentials_dir is not None:
        directory = Path(registry.credentials_dir)
        username = (directory / "username").read_text().strip()
        password = (directory / "password").read_text().strip()
    else:
        username = os.environ.get(USERNAME_ENV, "")
        password = os.environ.get(PASSWORD_ENV, "")
    if username:
        config["basic.auth.user.info"] = f"{username}:{password}"
    return config


class SchemaCatalog:
    """The Avro schemas of one App's queries, as the registry gave them."""

    def __init__(
        self, client: SchemaRegistryClient, *, stop: threading.Event | None = None
    ) -> None:
        self._client = client
        self._stop = stop or threading.Event()
        self._readings: dict[str, avrorecords.AvroReading] = {}
        self._writings: dict[tuple[str, str], records.AvroWriting] = {}

    @classmethod
    def for_spec(
        cls, spec: runspecs.RunSpec, *, stop: threading.Event | None = None
    ) -> SchemaCatalog | None:
        """The App's catalog, None when it has no Avro."""
        if not avrospecs.uses_avro(spec.inputs, spec.outputs):
            return None
        if spec.schema_registry is None:
            raise SchemaRegistryRefusedError(
                "the App reads or writes avro, and its run spec names no schema registry"
            )
        return cls(SchemaRegistryClient(client_config(spec.schema_registry)), stop=stop)

    def close(self) -> None:
        """Release the client's connections."""
        self._client.close()

    def _ask(self, what: str, call: Any, *args: Any) -> Any:
        """`call(*args)` until the registry answers (see the module's docstring)."""
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_outage),
            wait=tenacity.wait_exponential(multiplier=0.5, max=30),
            stop=tenacity.stop_when_event_set(self._stop),
            before_sleep=lambda state: log.warning(
                "schema registry unreachable (%s): %s; asking again",
                what,
                type(state.outcome.exception()).__name__ if state.outcome else "?",
            ),
            reraise=True,
        )
        return retrying(call, *args)

    # Reading --------------------------------------------------------------------------------

    def readings(self, spec: runspecs.RunSpec) -> dict[str, avrorecords.AvroReading]:
        """How each Avro input is decoded now (its reader fixed at the first call)."""
        for item in spec.inputs:
            if item.avro is not None and item.name not in self._readings:
                self._readings[item.name] = self._first_reading(item.name, item.avro)
        return dict(self._readings)

    def _first_reading(self, name: str, avro: runspecs.AvroSpec) -> avrorecords.AvroReading:
        writers = self._versions(avro.subject)
        if avro.inline_schema is not None:
            reader = avro.inline_schema
        elif not writers:
            raise SchemaRegistryRefusedError(
                f"input {name}: subject {avro.subject} has no schema in the registry: register "
                f"one (a producer's serializer does on its first record), or give the input's "
                f"reader schema inline (avro.schema)"
            )
        elif avro.version is not None:
            reader = self._version(name, avro.subject, avro.version).schema.schema_str
        else:
            reader = writers[max(writers)][1]
        log.info("input %s reads %s with %d writer schemas", name, avro.subject, len(writers))
        return avrorecords.AvroReading(
            reader=reader, writers={schema_id: text for schema_id, text in writers.values()}
        )

    def _versions(self, subject: str) -> dict[int, tuple[int, str]]:
        """The subject's Avro versions: version -> (schema id, schema); none if no subject."""
        try:
            numbers = self._ask(subject, self._client.get_versions, subject)
        except SchemaRegistryError as error:
            if error.http_status_code == _NOT_FOUND:
                return {}
            raise
        found = {}
        for number in numbers:
            registered = self._ask(subject, self._client.get_version, subject, number)
            if (registered.schema.schema_type or AVRO) == AVRO:
                found[number] = (registered.schema_id, registered.schema.schema_str)
        return found

    def _version(self, where: str, subject: str, version: int) -> Any:
        try:
            return self._ask(subject, self._client.get_version, subject, version)
        except SchemaRegistryError as error:
            if error.http_status_code == _NOT_FOUND:
                raise SchemaRegistryRefusedError(
                    f"{where}: subject {subject} has no version {version} in the registry "
                    f"({error.error_message}): name a registered version"
                ) from None
            raise

    def learn(self, ids: Mapping[str, set[int]]) -> None:
        """Ask the registry for the schema ids an input's records carry and its query did not
        know: each is a writer's schema, or unknown."""
        for name, schema_ids in ids.items():
            reading = self._readings[name]
            writers, unknown = dict(reading.writers), set(reading.unknown)
            for schema_id in schema_ids:
                schema = self._schema(schema_id)
                if schema is None:
                    unknown.add(schema_id)
                else:
                    writers[schema_id] = schema
                known = "not in the registry" if schema is None else "learned"
                log.info("input %s: schema id %d %s", name, schema_id, known)
            self._readings[name] = avrorecords.AvroReading(
                reader=reading.reader, writers=writers, unknown=frozenset(unknown)
            )

    def _schema(self, schema_id: int) -> str | None:
        """The Avro schema of an id, None when the registry has no such Avro schema."""
        try:
            schema = self._ask(f"id {schema_id}", self._client.get_schema, schema_id)
        except SchemaRegistryError as error:
            if error.http_status_code == _NOT_FOUND:
                return None
            raise
        return schema.schema_str if (schema.schema_type or AVRO) == AVRO else None

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
            registered = self._version(where, avro.subject, avro.version)
            writing = records.AvroWriting(registered.schema_id, registered.schema.schema_str)
        else:
            schema = avro.inline_schema or avroschemas.canonical(
                avroschemas.derive(
                    struct,
                    columns,
                    name=avroschemas.record_name(f"{output.topic}_{part}"),
                    what=where,
                )
            )
            writing = records.AvroWriting(self._register(where, avro.subject, schema), schema)
        self._writings[(output.id, part)] = writing
        return writing

    def _register(self, where: str, subject: str, schema: str) -> int:
        try:
            schema_id: int = self._ask(
                subject, self._client.register_schema, subject, Schema(schema, AVRO)
            )
        except SchemaRegistryError as error:
            if _outage(error):
                raise  # asked until stopped: no answer to show
            raise SchemaRegistryRefusedError(
                f"{where}: the schema registry refused the schema for subject {subject} (HTTP "
                f"{error.http_status_code}): {error.error_message}. Make the change compatible "
                f"with the subject's versions (new fields need defaults), or write to another "
                f"subject"
            ) from None
        log.info("%s: schema id %d registered under %s", where, schema_id, subject)
        return schema_id
