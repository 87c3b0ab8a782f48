"""Lookups: orders joined with the latest price of their item, across a replayed batch.

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
- orders and price updates keep coming while the driver runs; once two batches are committed,
  the next batch's commit is taken in its checkpoint (a commit-log entry written ahead of it,
  as a second driver on the same checkpoint would), so that batch writes its priced orders and
  then fails to commit, and the driver exits; then every price is updated, more orders are
  written, the entry is removed and the driver restarts from the checkpoint to the end: the
  same holds for all of them, and the interrupted batch, run again, joined what its first run
  joined: the orders it wrote twice carry the same version in both copies, and every copy of
  every order of that batch (its input offsets as logged) carries its item's version in the
  Table at the offsets pinned for the batch, computed here from the Table's topic, while the
  Table had moved on by the replay.
And the parts, on the broker without Spark:
- a replica reads a Table up to a pin exactly, however much more the topic holds, then on to
  the next pin; without a pin, to the end; tombstones remove keys; a replica past a pin says so;
- a batch's pins are the Tables' end offsets when first asked for, and the same offsets when
  asked again for that batch (a replay), while the next batch gets new ones, and so does a
  batch of the same number of another query (an App started over from an empty checkpoint).
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from rillet.runtime.queries import lookups, pinning
from rillet.tables import tables
from tests.integration import replays
from tests.integration import runtime_helpers as rt
from tests.integration.polling import wait_for

PARTITIONS = 3
ITEMS = 20
ORDERS = 600
PER_BATCH = 40
# The output query's checkpoint, under `rillet run`'s, and the group its lookups' pins are in.
QUERY = Path("checkpoint", "outputs", "topic-priced")
PINS_GROUP = "rillet.shop.pricing.topic-priced.lookups"
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


@dataclasses.dataclass(frozen=True)
class Interrupted:
    """The batch a stopped driver left logged and not committed, as the next driver finds it."""

    batch: int
    orders: dict[str, str]  # order id -> item, of the orders the batch reads (its logged offsets)
    pins: dict[int, int]  # the prices topic's partition -> offset the batch's lookups read to


def _interrupted(
    admin: AdminClient, bootstrap: str, topics: dict[str, str], query: Path
) -> Interrupted:
    """The batch to be run again: its orders from the orders topic between the offsets logged
    for it and for the batch before, and the pins committed for it (their metadata names the
    query and the batch)."""
    [batch] = set(replays.batch_ids(query, "offsets")) - set(replays.batch_ids(query, "commits"))
    ends = replays.logged_offsets(query, batch)[topics["orders"]]
    starts = replays.logged_offsets(query, batch - 1)[topics["orders"]] if batch else {}
    orders = {
        str(value["order_id"]): str(value["item"])
        for entry in rt.read_topic(bootstrap, topics["orders"])
        if starts.get(entry.partition, 0) <= entry.offset < ends.get(entry.partition, 0)
        and (value := json.loads(entry.value or b"null"))
    }
    query_id = json.loads((query / "metadata").read_text())["id"]
    partitions = admin.list_topics(topics["prices"], timeout=10).topics[topics["prices"]]
    request = ConsumerGroupTopicPartitions(
        PINS_GROUP, [TopicPartition(topics["prices"], p) for p in sorted(partitions.partitions)]
    )
    [future] = admin.list_consumer_group_offsets([request], request_timeout=30).values()
    committed = future.result().topic_partitions
    assert {tp.metadata for tp in committed} == {f"{query_id}:{batch}"}, committed
    return Interrupted(batch, orders, {tp.partition: tp.offset for tp in committed})


def _versions(entries: list[tables.Entry]) -> dict[str, int | None]:
    """Each item's version in a Table holding `entries` (its latest record, tombstones out)."""
    latest = tables.latest_per_key(entries)
    return {k.decode(): json.loads(e.value or b"null")["version"] for k, e in latest.items()}


def test_orders_see_every_price_written_before_them_and_a_replay_joins_as_its_first_run(
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
    measurement: Callable[[str], None],
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

    query = tmp_path / QUERY
    with rt.killed_at_exit(
        rt.start_driver(manifest, kafka_bootstrap, tmp_path, per_batch=PER_BATCH),
        log=tmp_path / "driver.log",
    ) as driver:
        shop.trade(rng, ORDERS // 3)

        def traded_then(done: Callable[[], bool]) -> bool:
            shop.trade(rng, 1)  # the Table keeps changing, and orders keep coming, while it runs
            return done()

        # Two batches committed first: the pins group then holds earlier batches' pins, which
        # the replay must tell from its own.
        wait_for(
            lambda: traded_then(lambda: len(replays.batch_ids(query, "commits")) >= 2),
            timeout=180,
            what="two batches committed",
        )
        taken = replays.take_next_commit(query)
        wait_for(
            lambda: traded_then(lambda: driver.poll() is not None),
            timeout=180,
            what=f"the driver to stop at batch {taken.batch}'s commit",
        )
    log = (tmp_path / "driver.log").read_text()
    assert driver.returncode != 0, log[-3000:]
    assert "CONCURRENT_STREAM_LOG_UPDATE" in log, log[-3000:]
    taken.release()
    interrupted = _interrupted(kafka_admin, kafka_bootstrap, topics, tmp_path / QUERY)
    pinned = _versions(
        [
            entry
            for entry in rt.read_topic(kafka_bootstrap, topics["prices"])
            if entry.offset < interrupted.pins[entry.partition]
        ]
    )
    # Every price moves on, so a replay that read the Table as it is now would differ.
    for item, version in list(shop.versions.items()):
        shop.price(item, (version or 0) + 1)
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

    seen: dict[str, list[object]] = defaultdict(list)
    for c in copies:
        seen[str(c["order_id"])].append(c["version"])
    again = {order for order, versions in seen.items() if len(versions) > 1}
    assert again, f"no order was written twice: batch {interrupted.batch} did not run again"
    assert again <= set(interrupted.orders), "orders of other batches were written twice"
    unlike = {
        order: (seen[order], pinned.get(item))
        for order, item in interrupted.orders.items()
        if any(version != pinned.get(item) for version in seen[order])
    }
    assert not unlike, (
        f"batch {interrupted.batch} run again joined other prices than at its pins "
        f"(order: versions written, version pinned): {list(unlike.items())[:5]}"
    )
    now = _versions(rt.read_topic(kafka_bootstrap, topics["prices"]))
    # Without this, a replay that ignored its pins could have joined the same values by chance.
    items = {interrupted.orders[order] for order in again}
    moved = {item for item in items if pinned.get(item) != now.get(item)}
    assert moved, "no price of the orders run again changed after their pins: nothing was proven"
    measurement(
        f"lookups: batch {interrupted.batch} ({len(interrupted.orders)} orders) run again after "
        f"a failed commit: {len(again)} orders written twice, each copy with the version pinned "
        f"for it, though {len(moved)} of their {len(items)} items were repriced before the replay"
    )


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
