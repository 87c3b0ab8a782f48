"""A Table's server (`rillet table serve`) on real Kafka: lookups, following, retention, restart.

Test plan (a compact,delete topic of three partitions with JSON keys, as a windowed Table's,
written by a producer; the server runs as its own process, as in its pod):
- once Ready, it answers an exact key with the stored value (whatever the JSON spacing of the
  key asked), a partial object with every matching window (header Rillet-Match: partial), a
  tombstoned key and a key never written with 404;
- it answers in milliseconds (README, docs/tables.md): a few hundred lookups of the keys
  written, on one kept-alive connection as a client makes them, each return the value written,
  and their median is under LOOKUP_MEDIAN_BOUND and within LOOKUP_HEALTH_RATIO of the median
  of /healthz requests interleaved with them (the same server's HTTP round trip without a
  lookup: the baseline bench/tables.py uses too); the topic holds FILLER_KEYS more keys, so
  that a lookup which scanned the Table would fail that ratio;
- `rillet table get --server` prints what the server answers (with no Kafka reachable), and
  exits 1 for a missing key;
- it follows the topic: a new value and a tombstone written after it became Ready are served
  within seconds; its metrics (on a port of their own) count its keys and show no lag;
- records deleted below a partition's log start (what retention does to a windowed Table; done
  here with DeleteRecords) disappear from its answers, and the other partitions' stay;
- restarted after a tombstone and an update were written while it was down, it answers 503
  until caught up, never the stale value, then the deleted key is 404 and the update served.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from rillet.tables import watermarks
from rillet_devstack import processes
from rillet_devstack import stack as devstack

from .avroorders import ORDER, ORDER_JSON, ORDER_V1, with_field
from .polling import wait_for

CLI = (sys.executable, "-m", "rillet.cli")
TABLE = "profiles"
USERS = 30
# "In milliseconds", with room for a shared 2-core machine: a lookup is a SQLite point read
# (p99 22 us, docs/tables.md) inside an HTTP round trip of about a millisecond here.
TIMED_LOOKUPS = 300
LOOKUP_MEDIAN_BOUND = 0.050
# A lookup costs about what any request costs; a store that scanned the Table would not.
LOOKUP_HEALTH_RATIO = 10.0
# Keys only the timing needs: with them a lookup that scanned the Table (SQLite scans about a
# key a microsecond here) would take some 35 ms, far past LOOKUP_HEALTH_RATIO round trips.
FILLER_KEYS = 40_000
CHANNEL = {"name": "channel", "type": "string", "default": "web"}


class TrackedProducer:
    """A producer that remembers the partition of each key's last acknowledged record."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap})
        self.partition_of: dict[bytes, int] = {}

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        assert error is None, error
        key = message.key()
        if key is not None:
            self.partition_of[key] = message.partition() or 0

    def send(self, key: bytes | None, value: bytes | None) -> None:
        self.producer.produce(self.topic, key=key, value=value, on_delivery=self._delivered)

    def flush(self) -> None:
        assert self.producer.flush(30) == 0


def _key(user: str) -> str:
    return json.dumps({"user": user}, separators=(",", ":"))


def _value(user: str, visits: int) -> bytes:
    return json.dumps({"user": user, "visits": visits}, separators=(",", ":")).encode()


@contextlib.contextmanager
def _serving(
    bootstrap: str,
    topic: str,
    store: Path,
    *,
    formats: tuple[str, str] = ("json", "json"),
    env: Mapping[str, str] | None = None,
    options: Sequence[str] = (),
) -> Iterator[tuple[str, str]]:
    """`rillet table serve` on a free port (`formats`: of keys and values; `env`: more of its
    environment; `options`: more of its command line); the URLs of its lookups and of its
    metrics. Stopped (SIGTERM) afterwards."""
    port, metrics_port = processes.free_port(), processes.free_port()
    command = [
        *CLI,
        "table",
        "serve",
        TABLE,
        f"--topic={topic}",
        f"--key-format={formats[0]}",
        f"--value-format={formats[1]}",
        f"--port={port}",
        f"--metrics-port={metrics_port}",
        f"--store-dir={store}",
        "--refresh-seconds=1",
        "--host=127.0.0.1",
        # A server of one's own outside the cluster; the pods' RBAC authorization is
        # test_table_server_on_node's.
        "--authorization=none",
        *options,
    ]
    log = store.parent / f"server-{port}.log"
    # The registry only as `env` gives it (a shell of `rillet dev env` has its user in env).
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("RILLET_SCHEMA_")}
    environment = {**inherited, "RILLET_KAFKA_BOOTSTRAP": bootstrap, **(env or {})}
    with (
        log.open("wb") as out,
        subprocess.Popen(command, stdout=out, stderr=out, env=environment) as server,
    ):
        try:
            yield f"http://127.0.0.1:{port}", f"http://127.0.0.1:{metrics_port}"
        finally:
            server.terminate()
            server.wait(timeout=30)
    assert server.returncode == 0, log.read_text()[-3000:]


def _get(url: str, key: str) -> httpx.Response:
    return httpx.get(f"{url}/tables/{TABLE}/{quote(key, safe='')}", timeout=10)


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=5).status_code == 200
    except httpx.TransportError:  # not listening yet
        return False


def _metric(metrics_url: str, name: str) -> float:
    for line in httpx.get(f"{metrics_url}/metrics", timeout=5).text.splitlines():
        if line.startswith(f"{name}{{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} in the server's metrics")


def _timed_lookups(
    url: str, expected: dict[str, Any], count: int
) -> tuple[list[float], list[float]]:
    """Seconds of `count` lookups of `expected`'s keys and of as many /healthz requests,
    interleaved on one kept-alive connection; each lookup must answer its expected value."""
    keys = list(expected)
    lookups: list[float] = []
    health: list[float] = []
    with httpx.Client(base_url=url, timeout=10) as client:

        def timed(path: str, into: list[float]) -> httpx.Response:
            started = time.perf_counter()
            answer = client.get(path)
            into.append(time.perf_counter() - started)
            assert answer.status_code == 200, (path, answer.status_code, answer.text)
            return answer

        assert client.get("/healthz").status_code == 200  # connected before the first timing
        for n in range(count):
            key = keys[n % len(keys)]
            lookup = f"/tables/{TABLE}/{quote(key, safe='')}"
            # Alternated, so that neither kind always runs right after the other.
            if n % 2:
                found, _ = timed(lookup, lookups), timed("/healthz", health)
            else:
                _, found = timed("/healthz", health), timed(lookup, lookups)
            assert found.json() == expected[key], (key, found.text)
    return lookups, health


def _answers_in_milliseconds(
    url: str, expected: dict[str, Any], measurement: Callable[[str], None]
) -> None:
    """The promise "a key lookup in milliseconds", timed as a client sees it and reported."""
    started = time.monotonic()
    lookups, health = _timed_lookups(url, expected, TIMED_LOOKUPS)
    took = time.monotonic() - started
    lookup_median, health_median = statistics.median(lookups), statistics.median(health)
    lookup_p99 = sorted(lookups)[int(len(lookups) * 0.99)]
    figures = (
        f"Table server: {len(lookups)} lookups on one keep-alive connection, median "
        f"{lookup_median * 1e3:.2f} ms, p99 {lookup_p99 * 1e3:.2f} ms; /healthz interleaved, "
        f"median {health_median * 1e3:.2f} ms (lookup/healthz "
        f"{lookup_median / health_median:.1f}x); {took:.1f} s in all"
    )
    measurement(figures)
    assert lookup_median < LOOKUP_MEDIAN_BOUND, figures
    assert lookup_median < LOOKUP_HEALTH_RATIO * health_median, figures


def _table_get(
    url: str, topic: str, key: str, key_format: str = "json"
) -> subprocess.CompletedProcess[str]:
    # -b: nothing listens there, so the answer can only come from the server.
    options = ["--topic", topic, "--key-format", key_format, "--server", url, "-b", "127.0.0.1:1"]
    return subprocess.run(
        [*CLI, "table", "get", TABLE, key, *options],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _answers_only_fresh_values(url: str, deleted: str, updated: str) -> bool:
    """Whether the server is Ready; until then every lookup must be 503 (or no answer yet)."""
    for key in (deleted, updated):
        try:
            answer = _get(url, key)
        except httpx.TransportError:
            return False
        if not _ready(url):
            assert answer.status_code == 503, (key, answer.status_code, answer.text)
            return False
    return True


def test_a_served_table_answers_follows_forgets_and_restarts_without_stale_values(
    kafka_bootstrap: str,
    kafka_admin: AdminClient,
    kafka_prefix: str,
    tmp_path: Path,
    measurement: Callable[[str], None],
) -> None:
    topic = f"{kafka_prefix}-profiles"
    windowed_table_config = {"cleanup.policy": "compact,delete", "retention.ms": "-1"}
    created = kafka_admin.create_topics(
        [NewTopic(topic, 3, 1, config=windowed_table_config)], operation_timeout=30
    )
    created[topic].result(timeout=60)
    writer = TrackedProducer(kafka_bootstrap, topic)
    for n in range(1, USERS + 1):
        writer.send(_key(f"u{n}").encode(), _value(f"u{n}", n))
    windows = [("/home", "10:00", 3), ("/home", "10:05", 1), ("/cart", "10:00", 9)]
    for page, start, views in windows:
        key = json.dumps({"page": page, "start": start}, separators=(",", ":")).encode()
        writer.send(key, json.dumps({"views": views}).encode())
    writer.send(_key("u3").encode(), None)  # a tombstone
    for n in range(FILLER_KEYS):
        writer.send(_key(f"filler{n}").encode(), _value(f"filler{n}", 0))
    writer.flush()
    store = tmp_path / "store"

    with _serving(kafka_bootstrap, topic, store) as (url, metrics):
        wait_for(lambda: _ready(url), timeout=60, what="the server to catch up")

        assert _get(url, _key("u1")).json() == {"user": "u1", "visits": 1}
        assert _get(url, '{ "user" : "u2" }').json() == {"user": "u2", "visits": 2}
        assert _get(url, _key("u3")).status_code == 404
        assert _get(url, _key("u99")).status_code == 404
        home = _get(url, '{"page":"/home"}')
        assert home.headers["Rillet-Match"] == "partial"
        assert [(m["key"]["start"], m["value"]["views"]) for m in home.json()] == [
            ("10:00", 3),
            ("10:05", 1),
        ]
        assert (
            _metric(metrics, "rillet_table_server_keys") == USERS - 1 + len(windows) + FILLER_KEYS
        )
        written = {
            _key(f"u{n}"): {"user": f"u{n}", "visits": n} for n in range(1, USERS + 1) if n != 3
        }
        _answers_in_milliseconds(url, written, measurement)

        found = _table_get(url, topic, '{"user": "u1"}')
        assert (found.returncode, found.stdout) == (0, '{"user":"u1","visits":1}\n'), found.stderr
        missing = _table_get(url, topic, '{"user": "u99"}')
        assert missing.returncode == 1, missing.stderr

        writer.send(_key("u1").encode(), _value("u1", 100))
        writer.send(_key("u2").encode(), None)
        writer.flush()
        wait_for(
            lambda: (
                _get(url, _key("u1")).json() == {"user": "u1", "visits": 100}
                and _get(url, _key("u2")).status_code == 404
            ),
            timeout=30,
            what="a new value and a tombstone to be served",
        )
        wait_for(
            lambda: _metric(metrics, "rillet_table_server_lag_records") == 0,
            timeout=30,
            what="no lag",
        )

        # Retention: every record of u4's partition so far is gone from Kafka.
        gone_partition = writer.partition_of[_key("u4").encode()]
        _, end = _watermarks(kafka_bootstrap, topic, gone_partition)
        deleted = kafka_admin.delete_records([TopicPartition(topic, gone_partition, end)])
        for future in deleted.values():
            future.result(timeout=30)
        kept = [
            n
            for n in range(4, USERS + 1)
            if writer.partition_of[_key(f"u{n}").encode()] != gone_partition
        ]
        wait_for(
            lambda: _get(url, _key("u4")).status_code == 404,
            timeout=30,
            what="u4 to go with its partition's records",
        )
        assert all(_get(url, _key(f"u{n}")).status_code == 200 for n in kept)

    deleted_user, updated_user = (f"u{n}" for n in kept[:2])
    writer.send(_key(deleted_user).encode(), None)
    writer.send(_key(updated_user).encode(), _value(updated_user, 500))
    writer.flush()
    with _serving(kafka_bootstrap, topic, store) as (url, _):
        wait_for(
            lambda: _answers_only_fresh_values(url, _key(deleted_user), _key(updated_user)),
            timeout=60,
            interval=0.05,
            what="the restarted server to be Ready",
        )
        assert _get(url, _key(deleted_user)).status_code == 404
        assert _get(url, _key(updated_user)).json() == {"user": updated_user, "visits": 500}


def _watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """A partition's low and high watermarks."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rillet-test-watermarks"})
    try:
        return watermarks.watermarks(consumer, topic, partition, timeout=10)
    finally:
        consumer.close()


def test_an_avro_tables_server_answers_json_decoded_with_each_writers_schema(
    stack: devstack.StackState,
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
) -> None:
    registry = stack.schema_registry
    if registry is None:
        pytest.fail("the stack runs without its schema registry", pytrace=False)
    topic = f"{kafka_prefix}-avro-profiles"
    kafka_admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[
        topic
    ].result(timeout=60)
    # As in the server's pod: the credentials are files of a mounted Secret, not env values.
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "username").write_text(registry.username)
    (credentials / "password").write_text(registry.password)
    env = {"RILLET_SCHEMA_REGISTRY_URL": registry.url}
    context = SerializationContext(topic, MessageField.VALUE)
    with SchemaRegistryClient(registry.client_config()) as client:
        try:
            older = AvroSerializer(client, json.dumps(ORDER_V1))(ORDER, context)
            newer = AvroSerializer(client, with_field(ORDER_V1, CHANNEL))(
                {**ORDER, "id": 8, "channel": "app"}, context
            )
            assert older is not None
            assert newer is not None
            unknown = b"\x00\x00\x0f\x42\x40" + older[5:]  # schema id 1000000
            writer = TrackedProducer(kafka_bootstrap, topic)
            for key, value in (("7", older), ("8", newer), ("9", unknown)):
                writer.send(key.encode(), value)
            writer.flush()

            with _serving(
                kafka_bootstrap,
                topic,
                tmp_path / "store",
                formats=("string", "avro"),
                env=env,
                options=[f"--registry-credentials-dir={credentials}"],
            ) as (url, _):
                wait_for(lambda: _ready(url), timeout=60, what="the server to catch up")

                assert _get(url, "7").json() == ORDER_JSON
                assert _get(url, "8").json() == {**ORDER_JSON, "id": 8, "channel": "app"}
                bad = _get(url, "9")
                assert bad.status_code == 500
                assert "the value of key 9 does not decode" in bad.json()["error"]
                printed = _table_get(url, topic, "7", key_format="string")
                assert printed.returncode == 0, printed.stderr
                assert json.loads(printed.stdout) == ORDER_JSON
        finally:
            client.delete_subject(f"{topic}-value")
            client.delete_subject(f"{topic}-value", permanent=True)
