"""`rillet table serve`: one Table's server (its topic followed into a store, read over HTTP).

The Table is found as `rillet table get` finds it (--file, the cluster with -n, or --topic with
--key-format and --value-format, which is how the operator starts it in a pod). Kafka security
settings come from the RILLET_KAFKA_* environment, as for the operator (the chart's Secret).

The store is rebuilt from the topic at every start, never resumed: while a server is down,
compaction may remove a tombstone older than the topic's delete.retention.ms, and a resumed store
would then serve a deleted key forever. Rebuilding 1,000,000 keys takes seconds
(bench/tables.py), during which the server is not Ready.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from aiohttp import web

from rillet.api.v1alpha1 import fields
from rillet.cli import options, tables
from rillet.settings import KafkaSettings, SchemaRegistrySettings
from rillet.tables import registryvalues, tablestore
from rillet.tables.serving import following
from rillet.tables.serving import web as serving_web

log = logging.getLogger(__name__)

ValueFormatOption = Annotated[
    str | None,
    typer.Option(
        help="json, string, bytes, avro or protobuf (default: from --file or the cluster, else "
        "json); avro and protobuf values are decoded with the registry of "
        "RILLET_SCHEMA_REGISTRY_URL."
    ),
]
PortOption = Annotated[int, typer.Option(help="HTTP port of lookups, probes and metrics.")]
HostOption = Annotated[str, typer.Option(help="Address to listen on.")]
StoreOption = Annotated[
    Path | None,
    typer.Option(
        "--store-dir",
        file_okay=False,
        help="Directory of the store, emptied at start (default: a temporary directory).",
    ),
]


RegistryCredentialsOption = Annotated[
    Path | None,
    typer.Option(
        "--registry-credentials-dir",
        file_okay=False,
        help="Directory of files `username` and `password` for the schema registry of avro "
        "and protobuf values (a mounted Secret), when RILLET_SCHEMA_REGISTRY_USERNAME is not "
        "set.",
    ),
]
RefreshOption = Annotated[
    float,
    typer.Option(
        help="Seconds between measuring lag, assigning new partitions and dropping what "
        "retention removed from the topic."
    ),
]


def register(table: typer.Typer) -> None:
    """Add `serve` to `rillet table`."""
    table.command("serve")(table_serve)


def table_serve(
    table: tables.TableArgument,
    bootstrap_servers: options.BootstrapOption,
    file: tables.FileOption = None,
    topic: tables.TopicOption = None,
    key_format: tables.KeyFormatOption = None,
    value_format: ValueFormatOption = None,
    namespace: tables.TableNamespaceOption = None,
    port: PortOption = 8080,
    host: HostOption = "0.0.0.0",
    store_dir: StoreOption = None,
    refresh_seconds: RefreshOption = 10.0,
    registry_credentials: RegistryCredentialsOption = None,
) -> None:
    """Serve TABLE over HTTP: GET /tables/TABLE/KEY answers from a local copy of its topic."""
    logging.basicConfig(level=logging.INFO, format=options.LOG_FORMAT)
    source = tables.resolve_table(
        table, file=file, topic=topic, namespace=namespace, fmt=key_format
    )
    values = tables.value_format_of(value_format or source.value_format)
    decoder = (
        _registry_values(values, source.topic, registry_credentials)
        if values in ("avro", "protobuf")
        else None
    )
    directory = store_dir or Path(tempfile.mkdtemp(prefix="rillet-table-"))
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    table_store = tablestore.TableStore(directory / "table.sqlite", source.key_format)
    follower = following.TableFollower(
        kafka_config=KafkaSettings(bootstrap=bootstrap_servers).client_config(),
        topic=source.topic,
        store=table_store,
        refresh_seconds=refresh_seconds,
    )
    follower.start()
    app = serving_web.application(
        table=table, store=table_store, follower=follower, value_format=values, decoder=decoder
    )
    log.info("serving Table %s (topic %s) on %s:%d", table, source.topic, host, port)
    try:
        web.run_app(app, host=host, port=port, print=None, access_log=None)
    finally:
        follower.stop()
        follower.join(timeout=10)
        table_store.close()
        if decoder is not None:
            decoder.close()


def _registry_values(
    fmt: fields.Format, topic: str, credentials_dir: Path | None
) -> registryvalues.RegistryValues:
    """The decoder of an avro or protobuf Table's values; a usage error without a registry."""
    try:
        registry = SchemaRegistrySettings().client_config(credentials_dir)
    except ValueError as error:
        raise typer.BadParameter(f"the Table's values are {fmt}, and {error}") from None
    return tables.registry_values(fmt, registry, topic)
