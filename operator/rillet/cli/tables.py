"""`rillet table` and `rillet table get`: the latest value of a key, found through --file, the
cluster or --topic (`rillet table serve` is in `tableserving`).

`resolve_table` finds a Table's topic and formats the way every `rillet table` command does.
A lookup goes to the Table's server when there is one (`--server`, else the one the cluster
names in the Table's status, through the apiserver's proxy), with the caller's bearer token for
its authorization (`clustertables`), and falls back to scanning the topic when that server
cannot answer (still loading, no Ready replica, the caller not allowed), saying so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, get_args
from urllib.parse import quote

import httpx
import typer
from confluent_kafka import KafkaException

from rillet.api.v1alpha1 import fields
from rillet.cli import options
from rillet.reconcile import manifests, runparts
from rillet.runtime.queries import protojson
from rillet.settings import SchemaRegistrySettings
from rillet.tables import avrovalues, clustertables, registryvalues, tables

TableArgument = Annotated[
    str, typer.Argument(help="The Table (its name, or its topic with --topic).")
]
KeyArgument = Annotated[
    str,
    typer.Argument(
        help="The key: text for string keys, JSON for json keys (an object may give "
        "some of the fields only)."
    ),
]
FileOption = Annotated[
    Path | None,
    typer.Option(
        "--file",
        "-f",
        exists=True,
        dir_okay=False,
        help="YAML file defining the Table (for its topic and key format).",
    ),
]
TopicOption = Annotated[
    str | None, typer.Option(help="The Table's topic (default: from --file, else TABLE).")
]
KeyFormatOption = Annotated[
    str | None, typer.Option(help="json, string or bytes (default: from --file, else string).")
]
TimeoutOption = Annotated[float, typer.Option(help="Seconds to read the topic in.")]
TableNamespaceOption = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        "-n",
        help="Namespace of the Table in the cluster (default: the kubeconfig context's).",
    ),
]


WatchOption = Annotated[
    bool,
    typer.Option(
        "--watch",
        "-w",
        help="After the current value, print each change of the key as key<TAB>value "
        "(<TAB>(deleted) for a tombstone) until interrupted.",
    ),
]


ServerOption = Annotated[
    str | None,
    typer.Option(
        "--server",
        help="URL of the Table's server, e.g. http://localhost:8080 through kubectl "
        "port-forward (default: the server the cluster names for the Table, if any).",
    ),
]


LookupBootstrapOption = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-servers",
        "-b",
        envvar=options.BOOTSTRAP_ENV,
        help="Kafka bootstrap servers (host:port,...), to read the topic; a lookup that the "
        "Table's server answers needs none.",
    ),
]


def register(app: typer.Typer) -> typer.Typer:
    """Add `rillet table` and its `get` to the `rillet` command line; `rillet table`."""
    table = typer.Typer(help="Read and serve Tables.", no_args_is_help=True)
    table.command("get")(table_get)
    app.add_typer(table, name="table")
    return table


def table_get(
    table: TableArgument,
    key: KeyArgument,
    bootstrap_servers: LookupBootstrapOption = None,
    file: FileOption = None,
    topic: TopicOption = None,
    key_format: KeyFormatOption = None,
    namespace: TableNamespaceOption = None,
    watch: WatchOption = False,
    server: ServerOption = None,
    timeout: TimeoutOption = 60.0,
) -> None:
    """Print the latest value of KEY in a Table; exit 1 if the Table has no such key.

    The Table is found in --file, else in the cluster (kubeconfig, -n), else TABLE is read as a
    topic; --topic names the topic outright. Its server answers when it has one, else its topic
    is read. One exact match prints its value; a partial JSON key prints `key<TAB>value` per
    match.
    """
    source = resolve_table(table, file=file, topic=topic, namespace=namespace, fmt=key_format)
    if not watch and _answered_by_server(source, server, table, key):
        return
    if bootstrap_servers is None:
        typer.echo(
            f"error: reading topic {source.topic} takes Kafka's bootstrap servers: give -b or "
            f"set {options.BOOTSTRAP_ENV}",
            err=True,
        )
        raise typer.Exit(code=2)
    if watch:
        _watch_topic(source, bootstrap_servers=bootstrap_servers, key=key, timeout=timeout)
    else:
        _get_from_topic(
            source, bootstrap_servers=bootstrap_servers, table=table, key=key, timeout=timeout
        )


def _get_from_topic(
    source: clustertables.ClusterTable,
    *,
    bootstrap_servers: str,
    table: str,
    key: str,
    timeout: float,
) -> None:
    """Print the key's latest value read from the topic; exit 1 if it has no such key."""
    fmt = source.key_format
    try:
        entries = tables.read_changelog(
            bootstrap_servers=bootstrap_servers, topic=source.topic, timeout=timeout
        )
    except (LookupError, TimeoutError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=2) from None
    found = tables.lookup(tables.latest_per_key(entries), key, fmt)
    if not found:
        typer.echo(f"{table}: no key {key}", err=True)
        raise typer.Exit(code=1)
    exact = len(found) == 1 and tables.same_key(found[0].key, key, fmt)
    with _value_text(source) as text:
        for entry in found:
            value = text(entry.value or b"")
            typer.echo(value if exact else f"{_key_text(entry)}\t{value}")


def _watch_topic(
    source: clustertables.ClusterTable, *, bootstrap_servers: str, key: str, timeout: float
) -> None:
    """Print the key's latest value read from the topic, then each change until interrupted."""
    fmt = source.key_format
    try:
        entries, later = tables.watch_changelog(
            bootstrap_servers=bootstrap_servers, topic=source.topic, timeout=timeout
        )
    except (LookupError, TimeoutError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=2) from None
    with _value_text(source) as text:
        for entry in tables.lookup(tables.latest_per_key(entries), key, fmt):
            _echo_change(entry, text)
        try:
            for entry in later:
                if entry.key is not None and tables.key_matches(entry.key, key, fmt):
                    _echo_change(entry, text)
        except KeyboardInterrupt:  # Ctrl-C ends a watch, as kubectl's
            return
        except KafkaException as error:  # the topic deleted, the cluster gone
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(code=2) from None


def resolve_table(
    table: str, *, file: Path | None, topic: str | None, namespace: str | None, fmt: str | None
) -> clustertables.ClusterTable:
    """The Table's topic and formats: from --file, else the cluster, else TABLE itself."""
    if file is not None:
        try:
            declared = manifests.table_in(options.load_manifests(file), table)
        except ValueError as error:
            raise typer.BadParameter(str(error), param_hint="--file") from None
        return clustertables.ClusterTable(
            topic=topic or runparts.topic_name(declared),
            key_format=key_format_of(fmt or declared.spec.key_format),
            value_format=declared.spec.value_format,
        )
    if topic is not None:
        return clustertables.ClusterTable(topic=topic, key_format=key_format_of(fmt or "string"))
    try:
        found = clustertables.find_table(table, namespace)
    except clustertables.ClusterError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=2) from None
    if found is None:
        if namespace is not None:
            raise typer.BadParameter(
                "no cluster configured (no kubeconfig, not in a pod) to find the Table in: "
                "give --file or --topic",
                param_hint="-n",
            )
        return clustertables.ClusterTable(topic=table, key_format=key_format_of(fmt or "string"))
    return dataclasses.replace(found, key_format=key_format_of(fmt or found.key_format))


def _ask(
    source: clustertables.ClusterTable, server: str | None, table: str, key: str
) -> clustertables.ServerAnswer | None:
    """The server's answer, None without a server to ask."""
    if server is not None:
        url = f"{server.rstrip('/')}/tables/{quote(table, safe='')}/{quote(key, safe='')}"
        authorization = clustertables.caller_authorization()
        headers = {"Authorization": authorization} if authorization else {}
        try:
            response = httpx.get(url, timeout=10.0, headers=headers)
        except httpx.HTTPError as error:
            typer.echo(f"error: the server at {server} did not answer: {error}", err=True)
            raise typer.Exit(code=2) from None
        partial = response.headers.get("Rillet-Match") == "partial"
        return clustertables.ServerAnswer(response.status_code, response.content, partial)
    if source.server is None:
        return None
    try:
        return clustertables.ask_server(source.server, key)
    except clustertables.ClusterError as error:
        typer.echo(f"note: {error}; reading the topic instead", err=True)
        return None


def _answered_by_server(
    source: clustertables.ClusterTable, server: str | None, table: str, key: str
) -> bool:
    """Print the server's answer and say whether it answered; exit 1 if it has no such key."""
    answer = _ask(source, server, table, key)
    if answer is None:
        return False
    if answer.status == 200 and not answer.partial:
        typer.echo(answer.body.decode(errors="replace"))
        return True
    if answer.status == 200:
        for match in json.loads(answer.body):
            typer.echo(f"{_text(match['key'])}\t{_text(match['value'])}")
        return True
    error = _server_error(answer.body)
    if answer.status == 404 and error is not None:  # the server's own 404, not the proxy's
        typer.echo(f"{table}: no key {key}", err=True)
        raise typer.Exit(code=1)
    why = error or answer.body.decode(errors="replace")[:200]
    route = source.server if server is None else None
    if (
        answer.status == 401
        and route
        and not clustertables.bearer_authorization(route.configuration)
    ):
        why = f"{why}; {clustertables.NO_TOKEN_HINT}"
    typer.echo(
        f"note: the Table's server answered {answer.status} ({why}); reading the topic", err=True
    )
    return False


def _server_error(body: bytes) -> str | None:
    """The message of a Table server's error answer (`{"error": ...}`), None for others."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    return str(parsed["error"]) if isinstance(parsed, dict) and "error" in parsed else None


def _text(value: Any) -> str:
    """A key or value as `rillet table get` prints it: text as is, JSON compact."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _echo_change(entry: tables.Entry, text: Callable[[bytes], str]) -> None:
    value = "(deleted)" if entry.value is None else text(entry.value)
    typer.echo(f"{_key_text(entry)}\t{value}")  # typer.echo flushes: a pipe sees each at once


def _key_text(entry: tables.Entry) -> str:
    return (entry.key or b"").decode(errors="replace")


def registry_values(
    fmt: fields.Format, registry: dict[str, Any], topic: str
) -> registryvalues.RegistryValues:
    """The decoder of a Table's avro or protobuf values, with the registry's client settings."""
    if fmt == "protobuf":
        return protojson.ProtoValues(registry, topic)
    return avrovalues.AvroValues(registry, topic)


@contextlib.contextmanager
def _value_text(source: clustertables.ClusterTable) -> Iterator[Callable[[bytes], str]]:
    """How the Table's values print: as they are, or avro and protobuf decoded into JSON (with
    the schema registry of RILLET_SCHEMA_REGISTRY_URL)."""
    if source.value_format not in ("avro", "protobuf"):
        yield lambda data: data.decode(errors="replace")
        return
    try:
        registry = SchemaRegistrySettings().client_config()
    except ValueError as error:
        typer.echo(f"error: Table values are {source.value_format}, and {error}", err=True)
        raise typer.Exit(code=2) from None
    values = registry_values(source.value_format, registry, source.topic)
    try:
        yield values.text
    finally:
        values.close()


def value_format_of(text: str) -> fields.Format:
    """`text` as a Table's value format, or a usage error naming --value-format."""
    if text not in get_args(fields.TableValueFormat):
        raise typer.BadParameter(
            f"{text!r}: use json, string, bytes, avro or protobuf", param_hint="--value-format"
        )
    return text  # type: ignore[return-value]  # checked just above


def key_format_of(text: str, option: str = "--key-format") -> fields.Format:
    """`text` as a key or value format, or a usage error naming `option`."""
    if text not in ("json", "string", "bytes"):
        raise typer.BadParameter(f"{text!r}: use json, string or bytes", param_hint=option)
    return text  # type: ignore[return-value]  # checked just above
