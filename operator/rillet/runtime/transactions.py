"""Exactly-once Topic outputs: each micro-batch reaches Kafka once, in Kafka transactions.

Spark's Kafka sink is at-least-once: a batch cut off by a failure runs again from the
checkpoint and sends its records again. Here a batch (`foreachBatch`, id b) is hashed by key
and value into `partitions` write units, and each unit p is written by one task in one Kafka
transaction of its own:

- the producer's `transactional.id` is `<group>.<query>.<p>`: starting it (init_transactions)
  fences any older producer of that id (a task of a killed or paused driver, a lost executor's)
  and settles the transaction it left open;
- the transaction carries a marker besides the records: offset b+1 of (output topic, partition
  0) committed for the group `<group>.<query>.done.<p>` through send_offsets_to_transaction. It
  becomes visible exactly when the records do;
- before writing, the task reads its marker (a read_committed consumer waits for pending
  transactional offsets): at b+1 or more, unit p of batch b is in Kafka already and is skipped.

A replayed batch reads the offsets Spark logged for it through the same plan, so it holds the
same records, and hashing puts the same ones in unit p as the first time. (The batch's own
partitions will not do: the order of a Kafka source's partitions changes from one driver to the
next.) Both names sit under the App's own prefix `<group>.`, which its Kafka principal is
allowed (reconcile.kafkaaccess).

A task gets its unit's rows as Arrow batches (mapInArrow) and hands them to the producer a
column at a time: Python Row objects cost more than producing the record (docs/runtime.md has
the figures). A task starts its producer for each batch (Spark runs a unit's task in whichever
Python worker is free: a producer kept in one worker would be fenced by the next one started in
another); the marker readers join no group and are kept for the worker's life.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import threading
from collections.abc import Iterator
from typing import Any, Final

import pyarrow as pa
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from pyspark import TaskContext
from pyspark.sql import DataFrame

MARKER_PARTITION: Final = 0
TIMEOUT_SECONDS: Final = 60.0
TRANSACTION_TIMEOUT_MS: Final = 60_000
# Starting a producer may wait for the transaction an older one left open to be aborted, which
# the coordinator may only do once that transaction times out.
INIT_TIMEOUT_SECONDS: Final = TRANSACTION_TIMEOUT_MS / 1000 * 2


@dataclasses.dataclass(frozen=True)
class TransactionalSink:
    """Where one query writes: the topic, the client settings, the names of its transactions."""

    config: dict[str, Any]  # librdkafka settings: bootstrap servers and login
    topic: str
    prefix: str  # <consumer group>.<query id>
    partitions: int  # write units: a record's unit is the hash of its key and value

    def transactional_id(self, unit: int) -> str:
        return f"{self.prefix}.{unit}"

    def marker_group(self, unit: int) -> str:
        return f"{self.prefix}.done.{unit}"


_markers: dict[str, Consumer] = {}
_markers_lock = threading.Lock()


def _marker(sink: TransactionalSink, unit: int) -> Consumer:
    """The marker reader of a write unit, kept for the worker's life (it joins no group)."""
    group = sink.marker_group(unit)
    with _markers_lock:
        if group not in _markers:
            _markers[group] = Consumer(
                {
                    **sink.config,
                    "group.id": group,
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "log_level": 3,
                }
            )
        return _markers[group]


def _producer(sink: TransactionalSink, unit: int) -> Producer:
    """A started transactional producer of the write unit's id.

    One per unit and batch, not kept: Spark runs a unit's task in whichever Python worker is
    free, and a producer started in another worker fences the one kept here, which would then
    fail the next batch that lands on this worker.
    """
    producer = Producer(
        {
            **sink.config,
            "transactional.id": sink.transactional_id(unit),
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
            "log_level": 3,
        }
    )
    producer.init_transactions(INIT_TIMEOUT_SECONDS)
    return producer


def written_through(marker: Consumer, topic: str) -> int:
    """The number of batches the marker says were written (the last batch id + 1), 0 if none."""
    [found] = marker.committed([TopicPartition(topic, MARKER_PARTITION)], timeout=TIMEOUT_SECONDS)
    return max(found.offset, 0)  # none committed: OFFSET_INVALID (-1001)


def _produce_batch(producer: Producer, topic: str, batch: pa.RecordBatch) -> int:
    """Produce the records of an Arrow batch with columns value, and key and headers if any
    (as Spark's Kafka sink takes them); the number produced. A column at a time into Python
    values, then one call per record: this loop is the exactly-once writer's cost per record."""
    names = batch.schema.names
    values = batch.column(names.index("value")).to_pylist()
    keys = batch.column(names.index("key")).to_pylist() if "key" in names else [None] * len(values)
    produce = producer.produce
    if "headers" not in names:
        for value, key in zip(values, keys, strict=True):
            try:
                produce(topic, value, key)
            except BufferError:  # the local queue is full
                _produce_once_room(producer, topic, value, key, None)
        return len(values)
    listed = batch.column(names.index("headers")).to_pylist()
    for value, key, entries in zip(values, keys, listed, strict=True):
        headers = [(str(h["key"]), h["value"]) for h in entries] if entries else None
        try:
            produce(topic, value, key, headers=headers)
        except BufferError:
            _produce_once_room(producer, topic, value, key, headers)
    return len(values)


def _produce_once_room(
    producer: Producer, topic: str, value: Any, key: Any, headers: list[Any] | None
) -> None:
    """Produce a record the full local queue refused: let deliveries make room, then again."""
    while True:
        producer.poll(0.05)
        try:
            producer.produce(topic, value, key, headers=headers)
            return
        except BufferError:
            continue


def _write_unit(
    sink: TransactionalSink, batch_id: int, unit: int, batches: Iterator[pa.RecordBatch]
) -> int:
    """Write unit `unit` of batch `batch_id` in one transaction, unless it was written before;
    the number of records written now."""
    # Started even for an empty unit: starting the producer of this id aborts what a killed
    # driver's task left open, which would hold read_committed consumers back until it timed
    # out.
    producer = _producer(sink, unit)
    try:
        marker = _marker(sink, unit)
        first = next((b for b in batches if b.num_rows), None)
        if first is None or written_through(marker, sink.topic) > batch_id:
            return 0  # nothing to write, or written before: nothing to mark
        producer.begin_transaction()
        count = sum(
            _produce_batch(producer, sink.topic, b) for b in itertools.chain([first], batches)
        )
        done = [TopicPartition(sink.topic, MARKER_PARTITION, batch_id + 1)]
        producer.send_offsets_to_transaction(
            done, marker.consumer_group_metadata(), TIMEOUT_SECONDS
        )
        producer.commit_transaction(TIMEOUT_SECONDS)
        return count
    except BaseException:
        # Fenced, or nothing open: the next producer of the id settles it either way.
        with contextlib.suppress(Exception):
            producer.abort_transaction(5)
        raise
    finally:
        # After a commit everything is delivered already. After a failure (a fenced producer)
        # what is left cannot be, and a flush timing out must not hide why the write failed.
        with contextlib.suppress(KafkaException):
            producer.flush(5)


def _write_arrow_unit(
    sink: TransactionalSink, batch_id: int, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function: the task's partition of the repartitioned batch is unit p."""
    context = TaskContext.get()
    assert context is not None  # set in every task
    written = _write_unit(sink, batch_id, context.partitionId(), batches)
    yield pa.RecordBatch.from_pydict({"written": [written]})


def write_batch(sink: TransactionalSink, batch: DataFrame, batch_id: int) -> int:
    """Write the batch's records (columns key, value, and headers if any) once; the count
    written now (0 for parts written before)."""
    units = batch.repartition(sink.partitions, *[c for c in ("key", "value") if c in batch.columns])
    write = functools.partial(_write_arrow_unit, sink, batch_id)
    return sum(row.written for row in units.mapInArrow(write, "written BIGINT").collect())
