"""Asking the schema registry (Confluent's REST API) on the driver's behalf: what the Avro and
Protobuf catalogs (schemacatalog, protocatalog) share.

A registry that cannot be reached (or answers 5xx) is asked again with backoff, for as long
as it takes, never taken for an answer. Its refusals are the App's to fix: an incompatible
schema or a missing subject or version raises terminations.SchemaRegistryRefusedError, which
the operator shows as the App's Stalled condition. Credentials come from the files of the
Secret the operator mounts (run spec `schema_registry.credentials_dir`), or, for a local
`rillet run`, from RILLET_SCHEMA_REGISTRY_USERNAME and _PASSWORD; never from the run spec.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from pathlib import Path
from typing import Any

import tenacity
from confluent_kafka.schema_registry import RegisteredSchema, Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from rillet.driverapi import runspecs, terminations

log = logging.getLogger(__name__)

USERNAME_ENV = "RILLET_SCHEMA_REGISTRY_USERNAME"
PASSWORD_ENV = "RILLET_SCHEMA_REGISTRY_PASSWORD"
# HTTP statuses that are answers about the request (not found, refused, invalid), not outages.
_NOT_FOUND = 404
AVRO = "AVRO"
PROTOBUF = "PROTOBUF"

SchemaRegistryRefusedError = terminations.SchemaRegistryRefusedError


def outage(error: BaseException) -> bool:
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


def schema_type(schema: Schema) -> str:
    """A schema's type: Confluent's API leaves it out for Avro."""
    return schema.schema_type or AVRO


@dataclasses.dataclass(frozen=True)
class Registered:
    """A schema the registry holds, with its id."""

    schema_id: int
    schema: Schema

    @property
    def text(self) -> str:
        """The schema as the registry serves it (Avro JSON, `.proto` text or base64)."""
        return self.schema.schema_str or ""

    @classmethod
    def of(cls, registered: RegisteredSchema) -> Registered:
        """A registered version as the registry's client answers it."""
        return cls(int(registered.schema_id or 0), registered.schema)


class Registry:
    """The registry, asked until it answers, its answers as values or refusals."""

    def __init__(
        self, client: SchemaRegistryClient, *, stop: threading.Event | None = None
    ) -> None:
        self._client = client
        self._stop = stop or threading.Event()

    def close(self) -> None:
        """Release the client's connections."""
        self._client.close()

    def ask(self, what: str, call: Any, *args: Any) -> Any:
        """`call(*args)` until the registry answers (see the module's docstring)."""
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(outage),
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

    def versions(self, subject: str, kind: str) -> dict[int, Registered]:
        """The subject's versions of schemas of type `kind`, by number; none if no subject."""
        try:
            numbers = self.ask(subject, self._client.get_versions, subject)
        except SchemaRegistryError as error:
            if error.http_status_code == _NOT_FOUND:
                return {}
            raise
        found = {}
        for number in numbers:
            registered = self.ask(subject, self._client.get_version, subject, number)
            if schema_type(registered.schema) == kind:
                found[number] = Registered.of(registered)
        return found

    def version(self, where: str, subject: str, version: int) -> Registered:
        """A version of a subject; refused when the registry has none such."""
        try:
            registered: RegisteredSchema = self.ask(
                subject, self._client.get_version, subject, version
            )
        except SchemaRegistryError as error:
            if error.http_status_code == _NOT_FOUND:
                raise SchemaRegistryRefusedError(
                    f"{where}: subject {subject} has no version {version} in the registry "
                    f"({error.error_message}): name a registered version"
                ) from None
            raise
        return Registered.of(registered)

    def schema(self, schema_id: int, kind: str) -> Schema | None:
        """The schema of an id, None when the registry has no such schema of type `kind`."""
        try:
            schema: Schema = self.ask(f"id {schema_id}", self._client.get_schema, schema_id)
        except SchemaRegistryError as error:
            if error.http_status_code == _NOT_FOUND:
                return None
            raise
        return schema if schema_type(schema) == kind else None

    def register(self, where: str, subject: str, schema: Schema, *, advice: str) -> int:
        """Register a schema under a subject (an identical one is the same id); refused with
        the registry's message and `advice` (what to change)."""
        try:
            schema_id: int = self.ask(subject, self._client.register_schema, subject, schema)
        except SchemaRegistryError as error:
            if outage(error):
                raise  # asked until stopped: no answer to show
            raise SchemaRegistryRefusedError(
                f"{where}: the schema registry refused the schema for subject {subject} (HTTP "
                f"{error.http_status_code}): {error.error_message}. {advice}"
            ) from None
        log.info("%s: schema id %d registered under %s", where, schema_id, subject)
        return schema_id
