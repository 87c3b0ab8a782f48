"""Lookups: orders joined with the latest price of their item, across a driver SIGKILL.

The App reads orders (json) with `lookups: [{table: prices, keyColumns: [item]}]` and writes
each order with the version of its item's price it saw. The test writes prices straight to the
Table's compacted topic, as an App upserting it would, and notes for each order the version of
its item that Kafka had acknowledged before the order was produced.

Test plan:
- a price update and an order of its item written back to back, before the driver starts and
  while it runs: the order sees that update (a batch sees every Table update written before
  it, whether or not in the same batch interval);
- every order is written, and every copy of it (at-least-once output: a replayed batch writes
  again) carries a version no older than the one acknowledged before the order;
- an item never priced, and an item whose price was deleted (a tombstone) before the order,
  give NULL;
- SIGKILL to the driver's process group mid-stream, updates and orders written while it is
  down, then a restart from the checkpoint to the end: the same holds for all of them.

And the parts, on the broker without Spark:
- a replica reads a Table up to a pin exactly, however much more the topic holds, then on to
  the next pin; without a pin, to the end; tombstones remove keys; a replica past a pin says so;
- a batch's pins are the Tables' end offsets when first asked for, and the same offsets when
  asked again for that batch (a replay), while the next batch gets new ones, and so does a
  batch of the same number of another query (an App started over from an empty checkpoint).
"""

from __future__ import annotations

import json
import os
import random
import signal
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from rillet.runtime import lookups, pinning
from tests.integration import runtime_helpers as rt
from tests.integration.polling import wait_for

PARTITIONS = 3
ITEMS = 20
ORDERS = 600
PER_BATCH = 40
UNPRICED = "never-priced"
DELETED = "deleted"

MANIFEST = """
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: orders}
spec: {partitions: 3}
---
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: priced}
spec: {partitions: 3}
---
apiVersion: rillet.io/v1alpha1
kind: Table
metadata: {name: prices}
spec:
  partitions: 3
  valueSchema: "item STRING, version BIGINT"
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata: {name: pricing, namespace: shop}
spec:
  image: rillet/spark-runtime:0.1.0
  inputs:
    - name: orders
      topicRef: {name: orders}
      schema: "order_id STRING, item STRING, seen BIGINT"
      startingOffsets: earliest
      lookups: [{table: prices, keyColumns: [item]}]
    - name: prices
      tableRef: {name: prices}
  pipeline:
    sql: SELECT order_id, item, seen, prices.version AS version FROM orders
  outputs:
    - topicRef: {name: priced}
      keyColumns: [order_id]
"""


class Shop:
    """Writes prices and orders; remembers what each order must see."""

    def __init__(self, bootstrap: str, topics: dict[str, str]) -> None:
        self.topics = topics
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        self.versions: dict[str, int | None] = {}
        self.expected: dict[str, int | None] = {}  # order id -> version it must see at least

    def price(self, item: str, version: int | None) -> None:
        """A price update (None: deleted), acknowledged by Kafka before this returns."""
        value = None if version is None else json.dumps({"item": item, "version": version})
        self.producer.produce(self.topics["prices"], key=item, value=value)
        assert self.producer.flush(30) == 0
        self.versions[item] = version

    def order(self, item: str) -> None:
        order_id = f"o{len(self.expected):04d}"
        seen = self.versions.get(item)
        self.expected[order_id] = seen
        record = {"order_id": order_id, "item": item, "seen": seen}
        self.producer.produce(self.topics["orders"], key=order_id, value=json.dumps(record))

    def trade(self, rng: random.Random, count: int) -> None:
        """`count` orders; most right after a price update of their item."""
        for _ in range(count):
            item = f"i{rng.randrange(ITEMS)}"
            if rng.random() < 0.7:
                self.price(item, (self.versions.get(item) or 0) + 1)
            self.order(rng.choice([item, item, item, UNPRICED]))
        assert self.producer.flush(30) == 0


def _copies(bootstrap: str, topic: str) -> list[dict[str, object]]:
    return rt.json_values(rt.read_topic(bootstrap, topic))


def test_orders_see_every_price_written_before_them_across_a_sigkill(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str, tmp_path: Path
) -> None:
    documents = rt.load_manifests(MANIFEST)
    topics = rt.privatize(documents, kafka_prefix)
    rt.create_topics(
        kafka_admin,
        [
            NewTopic(topics["orders"], PARTITIONS, 1),
            NewTopic(topics["priced"], PARTITIONS, 1),
            NewTopic(topics["prices"], PARTITIONS, 1, config={"cleanup.policy": "compact"}),
        ],
    )
    manifest = rt.write_manifests(documents, tmp_path / "app.yaml")
    shop, rng = Shop(kafka_bootstrap, topics), random.Random(11)
    for n in range(ITEMS):
        shop.price(f"i{n}", 0)
    shop.price(DELETED, 0)
    shop.price("i1", 1)
    shop.order("i1")  # in the driver's first batch, with the update written just before it
    shop.trade(rng, ORDERS // 3)

    with rt.killed_at_exit(
        rt.start_driver(manifest, kafka_bootstrap, tmp_path, per_batch=PER_BATCH),
        log=tmp_path / "driver.log",
    ) as driver:
        shop.trade(rng, ORDERS // 3)
        wait_for(
            lambda: len(_copies(kafka_bootstrap, topics["priced"])) >= ORDERS // 2,
            timeout=180,
            what="half of the orders priced",
        )
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    shop.price(DELETED, None)
    shop.order(DELETED)
    shop.trade(rng, ORDERS // 3)

    rt.run_driver_to_end(manifest, kafka_bootstrap, tmp_path, per_batch=PER_BATCH)

    copies = _copies(kafka_bootstrap, topics["priced"])
    assert {c["order_id"] for c in copies} == set(shop.expected)
    stale = [
        c
        for c in copies
        if (at_least := shop.expected[str(c["order_id"])]) is not None
        and (not isinstance(c["version"], int) or c["version"] < at_least)
    ]
    assert not stale, f"orders that missed a price written before them: {stale[:5]}"
    unpriced = [c for c in copies if c["item"] in (UNPRICED, DELETED)]
    assert unpriced, "no order of an unpriced or deleted item"
    assert all(c["version"] is None for c in unpriced)


def test_a_replica_reads_up_to_each_pin_exactly(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str, tmp_path: Path
) -> None:
    topic = f"{kafka_prefix}.pinned"
    rt.create_topics(kafka_admin, [NewTopic(topic, 2, 1, config={"cleanup.policy": "compact"})])
    rt.produce(kafka_bootstrap, topic, [(f"k{n}", f"v{n}") for n in range(10)], partitions=2)
    source = lookups.TableSource(
        config={"bootstrap.servers": kafka_bootstrap},
        topic=topic,
        key_format="string",
        group=f"{kafka_prefix}.lookups",
    )
    replica = lookups.TableReplica(source, tmp_path)
    keys: list[bytes | None] = [f"k{n}".encode() for n in range(10)]

    assert replica.catch_up({0: 2, 1: 3}) == 5  # k0 k2 from partition 0, k1 k3 k5 from 1
    assert replica.lookup(keys) == [b"v0", b"v1", b"v2", b"v3", None, b"v5", *[None] * 4]
    assert replica.catch_up({0: 4, 1: 3}) == 2
    assert replica.lookup(keys)[4:8] == [b"v4", b"v5", b"v6", None]
    with pytest.raises(lookups.ReplicaAheadError):
        replica.catch_up({0: 3, 1: 3})

    rt.produce(kafka_bootstrap, topic, [("k1", None), ("k8", "v8'")], partitions=2)
    replica.catch_up()  # no pin: to the end
    assert replica.lookup([b"k0", b"k1", b"k8", b"k9", None]) == [b"v0", None, b"v8'", b"v9", None]
    replica.close()


def test_a_batch_gets_the_same_pins_when_it_runs_again(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str
) -> None:
    topic = f"{kafka_prefix}.pins"
    rt.create_topics(kafka_admin, [NewTopic(topic, 2, 1, config={"cleanup.policy": "compact"})])
    rt.produce(kafka_bootstrap, topic, [("a", "1"), ("b", "1"), ("c", "1")], partitions=2)
    pins = pinning.LookupPins(
        config={"bootstrap.servers": kafka_bootstrap}, group=f"{kafka_prefix}.q", topics=[topic]
    )

    first = pins.pin("query-1", 7)
    assert first == {topic: {0: 2, 1: 1}}
    rt.produce(kafka_bootstrap, topic, [("a", "2"), ("b", "2")], partitions=2)
    assert pins.pin("query-1", 7) == first  # batch 7 again: a replay reads what it first read
    assert pins.pin("query-1", 8) == {topic: {0: 3, 1: 2}}
    # Batch 8 of a query started over from an empty checkpoint is not a replay.
    rt.produce(kafka_bootstrap, topic, [("c", "2")], partitions=2)
    assert pins.pin("query-2", 8) == {topic: {0: 4, 1: 2}}
    assert pinning.decode(pinning.encode("q", first)) == ("q", first)
