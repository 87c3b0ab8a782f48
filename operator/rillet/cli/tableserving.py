"""`rillet table serve`: one Table's server (its topic followed into a store, read over HTTP).

The Table is found as `rillet table get` finds it (--file, the cluster with -n, or --topic with
--key-format and --value-format, which is how the operator starts it in a pod). Kafka security
settings come from the RILLET_KAFKA_* environment, as for the operator (the chart's Secret).

Lookups are authorized by the cluster's RBAC (`--authorization=kubernetes`, the default):
the caller's token is reviewed by the apiserver of the pod (`--apiserver-ca-file`, in a pod) or
of the kubeconfig, against the Table `-n NAMESPACE/TABLE`. `--authorization=none` answers
anyone, for a server of one's own outside a cluster; the operator never starts one so.

The store is rebuilt from the topic at every start, never resumed: while a server is down,
compaction may remove a tombstone older than the topic's delete.retention.ms, and a resumed store
would then serve a deleted key forever. Rebuilding 1,000,000 keys takes seconds
(bench/tables.py), during which the server is not Ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import signal
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from aiohttp import web
from kubernetes import client, config

from rillet.api.v1alpha1 import fields
from rillet.cli import options, tables
from rillet.settings import KafkaSettings, SchemaRegistrySettings
from rillet.tables import registryvalues, tablestore
from rillet.tables.serving import authorizing, following
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
PortOption = Annotated[int, typer.Option(help="HTTP port of lookups and probes.")]
MetricsPortOption = Annotated[
    int, typer.Option(help="HTTP port of /metrics (Prometheus), apart from lookups.")
]
AuthorizationOption = Annotated[
    str,
    typer.Option(
        help="kubernetes: a lookup needs a bearer token whose identity may get the Table "
        "(RBAC, asked of the apiserver); none: anyone may look keys up."
    ),
]
ApiserverCaOption = Annotated[
    Path | None,
    typer.Option(
        "--apiserver-ca-file",
        dir_okay=False,
        help="CA of the in-cluster apiserver (KUBERNETES_SERVICE_HOST): set in a pod; "
        "otherwise the kubeconfig's cluster is asked (its credentials are not used).",
    ),
]
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
    metrics_port: MetricsPortOption = 9090,
    host: HostOption = "0.0.0.0",
    authorization: AuthorizationOption = "kubernetes",
    apiserver_ca: ApiserverCaOption = None,
    store_dir: StoreOption = None,
    refresh_seconds: RefreshOption = 10.0,
    registry_credentials: RegistryCredentialsOption = None,
) -> None:
    """Serve TABLE over HTTP: GET /tables/TABLE/KEY answers from a local copy of its topic."""
    logging.basicConfig(level=logging.INFO, format=options.LOG_FORMAT)
    source = tables.resolve_table(
        table, file=file, topic=topic, namespace=namespace, fmt=key_format
    )
    authorizer = _authorizer(authorization, table, namespace, apiserver_ca)
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
    apps = serving_web.application(
        table=table,
        store=table_store,
        follower=follower,
        value_format=values,
        decoder=decoder,
        authorizer=authorizer,
    )
    log.info(
        "serving Table %s (topic %s) on %s:%d, metrics on port %d, authorization %s",
        table,
        source.topic,
        host,
        port,
        metrics_port,
        authorization,
    )
    try:
        asyncio.run(_serve(apps, host=host, ports=(port, metrics_port)))
    finally:
        follower.stop()
        follower.join(timeout=10)
        table_store.close()
        if decoder is not None:
            decoder.close()


async def _serve(apps: Sequence[web.Application], *, host: str, ports: Sequence[int]) -> None:
    """Run each application on its port until SIGTERM or SIGINT."""
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    runners = [web.AppRunner(app, access_log=None) for app in apps]
    try:
        for runner, port in zip(runners, ports, strict=True):
            await runner.setup()
            await web.TCPSite(runner, host, port).start()
        await stopping.wait()
    finally:
        for runner in reversed(runners):
            with contextlib.suppress(Exception):
                await runner.cleanup()


def _authorizer(
    mode: str, table: str, namespace: str | None, ca_file: Path | None
) -> authorizing.Authorizer:
    """The lookups' authorizer of --authorization (a usage error without what it needs)."""
    if mode == "none":
        log.warning("authorization is off: anyone who reaches the server reads Table %s", table)
        return authorizing.AllowAll()
    if mode != "kubernetes":
        raise typer.BadParameter("kubernetes or none", param_hint="--authorization")
    if namespace is None:
        raise typer.BadParameter(
            "--authorization=kubernetes asks the cluster about the Table in a namespace: give -n",
            param_hint="-n",
        )
    if ca_file is not None:
        apiserver = authorizing.Apiserver.in_cluster(str(ca_file))
    else:
        apiserver = _kubeconfig_apiserver()
    return authorizing.RbacAuthorizer(
        apiserver=apiserver, namespace=namespace, table=table, cache=authorizing.DecisionCache()
    )


def _kubeconfig_apiserver() -> authorizing.Apiserver:
    """The kubeconfig's apiserver and CA: only where to ask, never whose credentials."""
    configuration = client.Configuration()
    try:
        config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except (config.ConfigException, FileNotFoundError) as error:
        raise typer.BadParameter(
            f"no apiserver to authorize lookups with ({error}): run in a pod with "
            f"--apiserver-ca-file, set KUBECONFIG, or give --authorization=none",
            param_hint="--authorization",
        ) from None
    return authorizing.Apiserver(url=configuration.host, ca_file=configuration.ssl_ca_cert)


def _registry_values(
    fmt: fields.Format, topic: str, credentials_dir: Path | None
) -> registryvalues.RegistryValues:
    """The decoder of an avro or protobuf Table's values; a usage error without a registry."""
    try:
        registry = SchemaRegistrySettings().client_config(credentials_dir)
    except ValueError as error:
        raise typer.BadParameter(f"the Table's values are {fmt}, and {error}") from None
    return tables.registry_values(fmt, registry, topic)
