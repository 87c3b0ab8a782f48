"""The Table server's HTTP API (aiohttp), its probes and its metrics.

- `GET /tables/<table>/<key>`: the key's latest value. One exact match answers with the value
  itself; a partial JSON key (a window's group fields) answers a JSON list of
  `{"key": ..., "value": ...}` with the header `Rillet-Match: partial`; no match is 404.
- `GET /tables/<table>?prefix=<p>&limit=<n>`: the entries whose key starts with `p`, in key
  order (at most `limit`, default 100, never more than 10,000), as that JSON list.
- `GET /readyz`: 200 once the store holds everything the topic held at start, else 503; a
  lookup before then is 503 too, so no client reads a value older than the server's start.
- `GET /healthz`: 200 while the process runs.
- `GET /metrics`, on a port of its own (`metrics_application`): Prometheus text, so that a
  scrape needs no lookup authorization and a NetworkPolicy can admit each port from its own.

Keys are taken as text (percent-decoded) and compared as `rillet table get` compares them.
Lookups are authorized (`authorizing`): 401 without a valid token, 403 when its identity may not
get the Table. A key that matches every key (`{}`) is refused (400); a partial key is a scan,
run on a thread with a deadline, and one matching more than MAX_MATCHES keys is refused (400).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from rillet.api.v1alpha1 import fields
from rillet.tables import tables
from rillet.tables.registryvalues import RegistryValues, UndecodableValueError
from rillet.tables.serving import authorizing
from rillet.tables.serving.following import TableFollower
from rillet.tables.tablestore import ScanTimeoutError, TableStore

MAX_LIMIT = 10_000
MAX_MATCHES = 1_000
SCAN_SECONDS = 2.0
_CONTENT_TYPES = {
    "json": "application/json",
    "string": "text/plain",
    "bytes": "application/octet-stream",
    "avro": "application/json",  # decoded (avrovalues)
    "protobuf": "application/json",  # decoded (registryvalues)
}


class ServerMetrics:
    """The server's Prometheus series, in a registry of its own."""

    def __init__(self, table: str, follower: TableFollower) -> None:
        self.registry = CollectorRegistry()
        labels = {"table": table}
        self.lookups = Counter(
            "rillet_table_server_lookups",
            "Lookups answered, by result (found, partial, missing, not_ready, refused, "
            "unauthenticated, forbidden).",
            ["table", "result"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "rillet_table_server_lookup_seconds",
            "Time to answer a lookup, from request to response.",
            ["table"],
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0),
            registry=self.registry,
        ).labels(**labels)
        lag = Gauge(
            "rillet_table_server_lag_records",
            "Records written to the Table's topic and not yet in the server's store.",
            ["table"],
            registry=self.registry,
        )
        lag.labels(**labels).set_function(lambda: sum(follower.lag.values()))
        keys = Gauge(
            "rillet_table_server_keys",
            "Keys the server's store holds (counted at each refresh).",
            ["table"],
            registry=self.registry,
        )
        keys.labels(**labels).set_function(lambda: follower.keys)
        ready = Gauge(
            "rillet_table_server_ready",
            "1 once the store has caught up with the topic as it was at start.",
            ["table"],
            registry=self.registry,
        )
        ready.labels(**labels).set_function(lambda: float(follower.caught_up.is_set()))


class _Routes:
    """The request handlers of one Table's server."""

    def __init__(
        self,
        *,
        table: str,
        store: TableStore,
        follower: TableFollower,
        value_format: fields.Format,
        decoder: RegistryValues | None,
        authorizer: authorizing.Authorizer,
    ) -> None:
        self.table, self.store, self.follower = table, store, follower
        self.authorizer = authorizer
        self.value_format = value_format
        self.value_type = _CONTENT_TYPES[value_format]
        self.metrics = ServerMetrics(table, follower)
        self.decoder = decoder

    async def _entries(self, found: list[tuple[bytes, bytes]], *, partial: bool) -> web.Response:
        """Matches as `[{"key": ..., "value": ...}]`, avro and protobuf values decoded into
        JSON."""
        try:
            body = [
                {"key": _decoded(key, self.store.key_format), "value": await self._value(value)}
                for key, value in found
            ]
        except UndecodableValueError as error:
            return _error(500, f"a value of Table {self.table} does not decode: {error}")
        headers = {"Rillet-Match": "partial"} if partial else None
        return web.json_response(body, headers=headers)

    async def _value(self, data: bytes) -> Any:
        if self.decoder is None:
            return _decoded(data, self.value_format)
        # In a thread: the first value of a schema id asks the registry for it.
        return await asyncio.to_thread(self.decoder.decoded, data)

    def _answered(self, result: str, started: float) -> None:
        self.metrics.lookups.labels(table=self.table, result=result).inc()
        self.metrics.latency.observe(time.perf_counter() - started)

    def _unknown_table(self, name: str) -> web.Response | None:
        if name == self.table:
            return None
        return _error(404, f"this server serves Table {self.table}, not {name}")

    def _not_ready(self) -> web.Response:
        lag = sum(self.follower.lag.values())
        behind = f" ({lag} records behind)" if lag else ""
        return _error(503, f"Table {self.table} is still being read from its topic{behind}")

    async def _refusal(self, request: web.Request, started: float) -> web.Response | None:
        """401 or 403 unless the caller's token may get the Table (503: cannot ask)."""
        try:
            decision = await self.authorizer.decide(authorizing.bearer_token(request.headers))
        except authorizing.ReviewUnavailableError as error:
            return _error(503, f"cannot check the caller's access to Table {self.table}: {error}")
        if decision.allowed:
            return None
        self._answered("unauthenticated" if decision.status == 401 else "forbidden", started)
        headers = {"WWW-Authenticate": "Bearer"} if decision.status == 401 else None
        return _error(decision.status, decision.reason, headers=headers)

    async def _matches(self, key: str) -> list[tuple[bytes, bytes]] | web.Response:
        """The entries matching a key; an exact key is an index read, on the event loop, and a
        partial one a scan, on a thread with a deadline (a 400 when it matches too much)."""
        if (problem := tables.match_all_problem(key, self.store.key_format)) is not None:
            return _error(400, problem)
        exact = self.store.get(key.encode())
        if exact is not None:
            return [(key.encode(), exact)]
        deadline = time.monotonic() + SCAN_SECONDS
        try:
            found = await asyncio.to_thread(
                self.store.lookup, key, limit=MAX_MATCHES + 1, deadline=deadline
            )
        except ScanTimeoutError:
            return _error(
                400, f"matching key {key} took over {SCAN_SECONDS:g} s: give more of its fields"
            )
        if len(found) > MAX_MATCHES:
            return _error(
                400, f"key {key} matches over {MAX_MATCHES} keys: give more of its fields"
            )
        return found

    async def get_key(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        if (wrong := self._unknown_table(request.match_info["table"])) is not None:
            return wrong
        if (refused := await self._refusal(request, started)) is not None:
            return refused
        if not self.follower.caught_up.is_set():
            self._answered("not_ready", started)
            return self._not_ready()
        key = request.match_info["key"]
        found = await self._matches(key)
        if isinstance(found, web.Response):
            self._answered("refused", started)
            return found
        if not found:
            self._answered("missing", started)
            return _error(404, f"Table {self.table} has no key {key}")
        if len(found) == 1 and tables.same_key(found[0][0], key, self.store.key_format):
            self._answered("found", started)
            if self.decoder is None:
                return web.Response(body=found[0][1], content_type=self.value_type)
            try:
                return web.json_response(await self._value(found[0][1]))
            except UndecodableValueError as error:
                return _error(500, f"the value of key {key} does not decode: {error}")
        self._answered("partial", started)
        return await self._entries(found, partial=True)

    async def get_prefixed(self, request: web.Request) -> web.Response:
        if (wrong := self._unknown_table(request.match_info["table"])) is not None:
            return wrong
        if (refused := await self._refusal(request, time.perf_counter())) is not None:
            return refused
        if not self.follower.caught_up.is_set():
            return self._not_ready()
        try:
            limit = min(int(request.query.get("limit", "100")), MAX_LIMIT)
        except ValueError:
            return _error(400, "limit must be a whole number")
        prefix = request.query.get("prefix", "").encode()
        # A range read of the key index, bounded by limit; on a thread all the same.
        found = await asyncio.to_thread(self.store.prefixed, prefix, max(limit, 0))
        return await self._entries(found, partial=False)

    async def ready(self, _: web.Request) -> web.Response:
        if self.follower.caught_up.is_set():
            return web.Response(text="ready\n")
        return self._not_ready()

    async def healthy(self, _: web.Request) -> web.Response:
        if not self.follower.is_alive():
            return _error(500, f"the reader of Table {self.table}'s topic stopped (see the log)")
        return web.Response(text="ok\n")

    async def metrics_text(self, _: web.Request) -> web.Response:
        response = web.Response(body=generate_latest(self.metrics.registry))
        response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
        return response


def application(
    *,
    table: str,
    store: TableStore,
    follower: TableFollower,
    value_format: fields.Format,
    authorizer: authorizing.Authorizer,
    decoder: RegistryValues | None = None,
) -> tuple[web.Application, web.Application]:
    """The server's aiohttp applications for one Table: lookups and probes, and metrics (to
    listen on a port of its own)."""
    routes = _Routes(
        table=table,
        store=store,
        follower=follower,
        value_format=value_format,
        decoder=decoder,
        authorizer=authorizer,
    )
    app = web.Application()
    app.add_routes(
        [
            web.get("/tables/{table}/{key:.+}", routes.get_key),
            web.get("/tables/{table}", routes.get_prefixed),
            web.get("/readyz", routes.ready),
            web.get("/healthz", routes.healthy),
        ]
    )

    async def close_authorizer(_: web.Application) -> None:
        await authorizer.close()

    app.on_cleanup.append(close_authorizer)
    metrics = web.Application()
    metrics.add_routes([web.get("/metrics", routes.metrics_text)])
    return app, metrics


def _decoded(data: bytes, data_format: fields.Format) -> Any:
    """JSON data as its value, other data as text (bytes as latin-1, which maps every byte)."""
    if data_format == "json":
        try:
            return json.loads(data)
        except ValueError:
            pass
    return data.decode("utf-8" if data_format == "string" else "latin-1", errors="replace")


def _error(status: int, message: str, *, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers)
