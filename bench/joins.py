"""Benchmark of stream-Table joins: the time of a micro-batch against the size of the Table.

    .venv/bin/python bench/joins.py          # needs the local stack (`rillet dev up`)

For each Table size in SIZES (keys, one record each, in a compacted topic of PARTITIONS
partitions, as an App's Table topic holds them), on the local stack's broker:
- an events topic holds BATCHES x PER_BATCH json events, each naming a random key of the Table;
- (lookup) the App joins each event with its key's value through `lookups`;
- (join) the same App with the join written in its SQL (LEFT JOIN with the Table's view), the
  way Apps joined before lookups: Spark plans the Table as a batch read of its topic at every
  micro-batch.
Both run with availableNow and maxOffsetsPerTrigger PER_BATCH in one local[2] SparkSession (the
JVM started before the clock). A batch's time is Spark's triggerExecution. The figure is the
median over the full batches after the first WARMUP: the first batch of a lookup App is where each
Python worker reads the whole Table into its store, printed apart. Every run is checked: one
output row per event, each with the value of its key.

Target (issue 13): with lookups, a batch at 1,000,000 keys takes at most 1.2x its time at
10,000. The machine has 2 cores shared with the broker: figures are medians, and the ratios are
what carries over to other machines.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from rillet.driverapi import runspecs
from rillet.reconcile import manifests
from rillet.runtime.batches import progress
from rillet.runtime.driver import driving, localspark
from rillet.tables import watermarks
from rillet_devstack import spark as devspark
from rillet_devstack import stack as devstack
from rillet_devstack import starting

SIZES = (10_000, 1_000_000)
PARTITIONS = 6
BATCHES = 8
PER_BATCH = 60_000
WARMUP = 2
TIERS = ("bronze", "silver", "gold")
TARGET = 1.2

MANIFEST = """
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: events}
spec: {partitions: 6, topicName: %(events)s}
---
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: enriched}
spec: {partitions: 6, topicName: %(enriched)s}
---
apiVersion: rillet.io/v1alpha1
kind: Table
metadata: {name: users}
spec: {partitions: 6, topicName: %(users)s, valueSchema: "user STRING, tier STRING"}
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata: {name: enrich}
spec:
  image: rillet/spark-runtime:0.1.0
  inputs:
    - name: events
      topicRef: {name: events}
      schema: "event STRING, user STRING"
      startingOffsets: earliest
      %(lookups)s
    - name: users
      tableRef: {name: users}
  pipeline:
    sql: %(sql)s
  outputs:
    - topicRef: {name: enriched}
"""
LOOKUP_SQL = "SELECT event, user, users.tier AS tier FROM events"
JOIN_SQL = "SELECT e.event, e.user, u.tier FROM events e LEFT JOIN users u ON e.user = u.user"


def user(n: int) -> str:
    return f"u{n:07d}"


def produce(bootstrap: str, topic: str, records: Any) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    for key, value in records:
        while True:
            try:
                producer.produce(topic, key=key, value=value)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def fill_table(bootstrap: str, topic: str, size: int) -> None:
    produce(
        bootstrap,
        topic,
        (
            (user(n), json.dumps({"user": user(n), "tier": TIERS[n % 3]}, separators=(",", ":")))
            for n in range(size)
        ),
    )


def fill_events(bootstrap: str, topic: str, size: int) -> None:
    rng = random.Random(size)
    events = (
        (None, json.dumps({"event": f"e{n}", "user": user(rng.randrange(size))}))
        for n in range(BATCHES * PER_BATCH)
    )
    produce(bootstrap, topic, events)


def check_output(bootstrap: str, topic: str) -> None:
    """One row per event, each with its key's tier (every event names a key of the Table)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}", "log_level": 3}
    )
    ends = {}
    for partition in range(PARTITIONS):
        ends[partition] = watermarks.watermarks(consumer, topic, partition, timeout=30)[1]
    consumer.assign([TopicPartition(topic, p, 0) for p in ends if ends[p] > 0])
    rows, wrong, done = 0, 0, {p for p, end in ends.items() if end == 0}
    while len(done) < PARTITIONS:
        for message in consumer.consume(10_000, timeout=5):
            if message.error():
                continue
            value = json.loads(message.value() or b"{}")
            rows += 1
            wrong += value["tier"] != TIERS[int(value["user"][1:]) % 3]
            if (message.offset() or 0) + 1 >= ends[message.partition() or 0]:
                done.add(message.partition() or 0)
    consumer.close()
    if rows != BATCHES * PER_BATCH or wrong:
        sys.exit(f"wrong output in {topic}: {rows} rows, {wrong} with the wrong tier")


def app_spec(bootstrap: str, way: str, topics: dict[str, str]) -> runspecs.RunSpec:
    """The App's run spec, joining the `way` given, on `topics` (events, users, enriched)."""
    lookups = "lookups: [{table: users, keyColumns: [user]}]" if way == "lookup" else ""
    sql = json.dumps(LOOKUP_SQL if way == "lookup" else JOIN_SQL)
    text = MANIFEST % {**topics, "lookups": lookups, "sql": sql}
    spec = manifests.build_run_spec_from_manifests(
        list(yaml.safe_load_all(text)),
        bootstrap_servers=bootstrap,
        checkpoint_location=tempfile.mkdtemp(prefix="rillet-bench-joins-"),
    )
    return spec.model_copy(
        update={
            "trigger": runspecs.TriggerSpec(available_now=True),
            "max_offsets_per_trigger": PER_BATCH,
            "shuffle_partitions": PARTITIONS,
        }
    )


def run(spark: Any, bootstrap: str, way: str, topics: dict[str, str]) -> list[float]:
    """Seconds of each batch of the App, the `way` given, in batch order."""
    enriched = f"bench-joins-out-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the topic is made
    admin.create_topics([NewTopic(enriched, PARTITIONS, 1)])[enriched].result(timeout=60)
    spec = app_spec(bootstrap, way, {**topics, "enriched": enriched})
    batches: list[progress.BatchProgress] = []
    driver = driving.Driver(spark, spec, on_batch=[batches.append])
    driver.start()
    driver.wait()
    driver.stop()
    driver.close_catalog()  # its registry client's connections
    check_output(bootstrap, enriched)
    # Full batches only: maxOffsetsPerTrigger spreads a batch over the partitions by their lag,
    # so the end of the input comes as a short last batch.
    ordered = sorted(batches, key=lambda b: b.batch_id)
    return [b.duration_seconds for b in ordered if b.input_rows >= PER_BATCH * 0.9]


def main() -> None:
    state = devstack.running() or starting.up()
    bootstrap = state.kafka_bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    jars = [str(jar) for jar in devspark.spark_jars()]
    master = "local[2]"
    spark = driving.build_session(
        app_spec(bootstrap, "lookup", {"events": "e", "users": "u", "enriched": "o"}),
        driving.RunOptions(
            master=master, spark_conf=localspark.local_spark_conf(jars=jars, master=master)
        ),
    )
    spark.range(1).collect()  # the JVM is up before the clock starts
    figures: dict[tuple[int, str], list[float]] = {}
    made: list[str] = []
    try:
        for size in SIZES:
            suffix = f"{size}-{uuid.uuid4().hex[:6]}"
            topics = {
                "events": f"bench-joins-events-{suffix}",
                "users": f"bench-joins-users-{suffix}",
            }
            made += topics.values()
            admin.create_topics(
                [
                    NewTopic(topics["events"], PARTITIONS, 1),
                    NewTopic(topics["users"], PARTITIONS, 1, config={"cleanup.policy": "compact"}),
                ]
            )[topics["users"]].result(timeout=60)
            started = time.monotonic()
            fill_table(bootstrap, topics["users"], size)
            fill_events(bootstrap, topics["events"], size)
            print(
                f"{size:,} keys: wrote the Table and {BATCHES * PER_BATCH:,} events in "
                f"{time.monotonic() - started:.1f}s",
                flush=True,
            )
            for way in ("lookup", "join"):
                figures[size, way] = run(spark, bootstrap, way, topics)
                print(f"  {way}: batches {[round(s, 2) for s in figures[size, way]]}", flush=True)
    finally:
        spark.stop()
        names = made + [n for n in admin.list_topics(timeout=30).topics if "bench-joins-out" in n]
        for future in admin.delete_topics(names).values() if names else ():
            future.result(timeout=60)
    report(figures)


def steady_ms(seconds: list[float]) -> float:
    return statistics.median(seconds[WARMUP:]) * 1000


def report(figures: dict[tuple[int, str], list[float]]) -> None:
    print(
        f"\nStream-Table join, {PER_BATCH:,} events per batch, {PARTITIONS} partitions, local[2] "
        f"(median of the full batches after the first {WARMUP}; the first apart)"
    )
    print(
        f"  {'Table keys':>12}  {'lookup ms/batch':>16}  {'(first)':>9}  {'SQL JOIN ms/batch':>18}"
    )
    for size in SIZES:
        lookup, join = figures[size, "lookup"], figures[size, "join"]
        print(
            f"  {size:>12,}  {steady_ms(lookup):>16.0f}  {lookup[0] * 1000:>9.0f}  "
            f"{steady_ms(join):>18.0f}"
        )
    small, large = SIZES[0], SIZES[-1]
    lookup_ratio = steady_ms(figures[large, "lookup"]) / steady_ms(figures[small, "lookup"])
    join_ratio = steady_ms(figures[large, "join"]) / steady_ms(figures[small, "join"])
    verdict = "PASS" if lookup_ratio <= TARGET else "FAIL"
    print(
        f"  {large:,} vs {small:,} keys: lookup {lookup_ratio:.2f}x (target <= {TARGET}x "
        f"{verdict}); SQL JOIN {join_ratio:.2f}x"
    )
    print(
        f"  at {large:,} keys a lookup batch takes "
        f"{steady_ms(figures[large, 'lookup']) / steady_ms(figures[large, 'join']):.2f}x a SQL "
        f"JOIN batch; at {small:,}, "
        f"{steady_ms(figures[small, 'lookup']) / steady_ms(figures[small, 'join']):.2f}x"
    )


if __name__ == "__main__":
    main()
