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

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from rillet.tables import watermarks

from . import tableserving
from .polling import wait_for

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


def _key(user: str) -> str:
    return json.dumps({"user": user}, separators=(",", ":"))


def _value(user: str, visits: int) -> bytes:
    return json.dumps({"user": user, "visits": visits}, separators=(",", ":")).encode()


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
            lookup = f"/tables/{tableserving.TABLE}/{quote(key, safe='')}"
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


def _answers_only_fresh_values(url: str, deleted: str, updated: str) -> bool:
    """Whether the server is Ready; until then every lookup must be 503 (or no answer yet)."""
    for key in (deleted, updated):
        try:
            answer = tableserving.get(url, key)
        except httpx.TransportError:
            return False
        if not tableserving.ready(url):
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
    writer = tableserving.TrackedProducer(kafka_bootstrap, topic)
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

    with tableserving.serving(kafka_bootstrap, topic, store) as (url, metrics):
        wait_for(lambda: tableserving.ready(url), timeout=60, what="the server to catch up")

        assert tableserving.get(url, _key("u1")).json() == {"user": "u1", "visits": 1}
        assert tableserving.get(url, '{ "user" : "u2" }').json() == {"user": "u2", "visits": 2}
        assert tableserving.get(url, _key("u3")).status_code == 404
        assert tableserving.get(url, _key("u99")).status_code == 404
        home = tableserving.get(url, '{"page":"/home"}')
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

        found = tableserving.table_get(url, topic, '{"user": "u1"}')
        assert (found.returncode, found.stdout) == (0, '{"user":"u1","visits":1}\n'), found.stderr
        missing = tableserving.table_get(url, topic, '{"user": "u99"}')
        assert missing.returncode == 1, missing.stderr

        writer.send(_key("u1").encode(), _value("u1", 100))
        writer.send(_key("u2").encode(), None)
        writer.flush()
        wait_for(
            lambda: (
                tableserving.get(url, _key("u1")).json() == {"user": "u1", "visits": 100}
                and tableserving.get(url, _key("u2")).status_code == 404
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
            lambda: tableserving.get(url, _key("u4")).status_code == 404,
            timeout=30,
            what="u4 to go with its partition's records",
        )
        assert all(tableserving.get(url, _key(f"u{n}")).status_code == 200 for n in kept)

    deleted_user, updated_user = (f"u{n}" for n in kept[:2])
    writer.send(_key(deleted_user).encode(), None)
    writer.send(_key(updated_user).encode(), _value(updated_user, 500))
    writer.flush()
    with tableserving.serving(kafka_bootstrap, topic, store) as (url, _):
        wait_for(
            lambda: _answers_only_fresh_values(url, _key(deleted_user), _key(updated_user)),
            timeout=60,
            interval=0.05,
            what="the restarted server to be Ready",
        )
        assert tableserving.get(url, _key(deleted_user)).status_code == 404
        assert tableserving.get(url, _key(updated_user)).json() == {
            "user": updated_user,
            "visits": 500,
        }


def _watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """A partition's low and high watermarks."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rillet-test-watermarks"})
    try:
        return watermarks.watermarks(consumer, topic, partition, timeout=10)
    finally:
        consumer.close()
