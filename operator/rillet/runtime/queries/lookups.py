"""Lookups: a topic input's records joined with the latest value of their key in a Table.

A JOIN with a Table's view in the SQL plans the Table as a batch read of its whole topic at every
micro-batch, so a batch costs time in proportion to the Table (reading.py). A lookup does not:

- each Python worker keeps a replica of the Table in a local SQLite store (`TableStore`, the
  one a Table's server keeps), in the executor's local directory;
- at the start of each task the replica reads the Table's topic up to the offsets the driver
  pinned for the batch just before it ran (pinning.py; without pins, in real-time mode, up to
  where the topic ends then). So a batch sees every update written before it started (a record
  in the same batch interval included), a replayed batch sees what its first run saw, and a
  task reads only what changed since its worker's last one;
- the task looks up the keys of its records in the store, a chunk of keys per query, and adds
  the values as a BINARY column that Spark then decodes as the Table input's view does.

A worker's first task reads the whole Table (an executor added by scaling pays it once per
worker); later ones read the changes. The replica holds every partition: a record's key need not
be its own topic's key, so any task may need any partition of the Table. Records below a
partition's log start are dropped from the store, as `rillet table get` drops them.

The store is a cache of the topic, the source of truth: a killed driver or lost executor loses
nothing; a new worker reads the Table again.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 (the customary alias)
from pyspark.sql.types import BinaryType, StructField, StructType

from rillet.api.v1alpha1 import fields
from rillet.driverapi import runspecs
from rillet.runtime.queries import avrorecords, pinning, protorecords, protostages, records
from rillet.tables import tables, watermarks
from rillet.tables.tablestore import TableStore

log = logging.getLogger(__name__)

TIMEOUT_SECONDS: Final = 30.0
# Records read per call while catching up; a call returns once it has them, or after the wait.
READ_CHUNK: Final = 10_000
READ_WAIT_SECONDS: Final = 0.2


@dataclasses.dataclass(frozen=True)
class TableSource:
    """Where a replica reads its Table: the topic, its key format, the client settings."""

    config: dict[str, Any] = dataclasses.field(repr=False)  # librdkafka settings, with login
    topic: str
    key_format: fields.Format
    group: str  # never joined nor committed to, but a consumer needs one (under the App's prefix)

    @property
    def identity(self) -> tuple[str, str]:
        """What tells two Tables apart within one App: its topic on its cluster."""
        return self.topic, str(self.config.get("bootstrap.servers"))


class TableReplica:
    """The latest value per key of one Table, in this process, caught up on demand."""

    def __init__(self, source: TableSource, directory: Path) -> None:
        self.topic = source.topic
        self.store = TableStore(directory / "table.sqlite", source.key_format)
        self._consumer = Consumer(
            {
                **source.config,
                # The replica assigns partitions itself and never commits, but librdkafka still
                # looks the group's coordinator up: the App's principal must be allowed it.
                "group.id": source.group,
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                # A task waits for its reads: answer a fetch as soon as there is anything.
                "fetch.wait.max.ms": 10,
                "log_level": 3,
            }
        )
        self._assigned: set[int] = set()
        self._sought: dict[int, int] = {}  # where the last seek in each partition went

    def catch_up(self, pin: Mapping[int, int] | None = None) -> int:
        """Read the Table up to `pin` (per partition, exclusive), or without one up to where
        each partition ends now; the number of records read."""
        marks = self._marks()
        if pin is None:
            targets = {p: high for p, (_, high) in marks.items()}
        else:
            targets = {p: offset for p, offset in pin.items() if p in marks}
            if self._past(targets):
                raise ReplicaAheadError(self.topic)
        self._assign(sorted(targets))
        self.store.forget_below({p: low for p, (low, _) in marks.items()})
        targets = {p: end for p, end in targets.items() if end > marks[p][0]}
        read = 0
        while remaining := self._remaining(targets):
            read += self._read(min(remaining, READ_CHUNK), None if pin is None else targets)
        # No fetching between tasks: a fetch waiting at the broker would hold up the next
        # task's watermark requests behind it (one request at a time per connection).
        self._consumer.pause([TopicPartition(self.topic, p) for p in sorted(self._assigned)])
        return read

    def lookup(self, keys: list[bytes | None]) -> list[bytes | None]:
        """The value of each key, None where the Table holds none."""
        found = self.store.get_many(k for k in keys if k is not None)
        return [None if key is None else found.get(key) for key in keys]

    def close(self) -> None:
        self._consumer.close()
        self.store.close()

    def _marks(self) -> dict[int, tuple[int, int]]:
        """(log start, high watermark) of each partition of the topic, as of now."""
        metadata = self._consumer.list_topics(self.topic, timeout=TIMEOUT_SECONDS)
        described = metadata.topics.get(self.topic)
        if described is None or described.error is not None:
            reason = "not found" if described is None else str(described.error)
            raise KafkaException(f"Table topic {self.topic}: {reason}")
        marks = {}
        for partition in sorted(described.partitions):
            marks[partition] = watermarks.watermarks(
                self._consumer, self.topic, partition, timeout=TIMEOUT_SECONDS
            )
        return marks

    def _assign(self, partitions: list[int]) -> None:
        new = [p for p in partitions if p not in self._assigned]
        if new:  # partitions added to the Table since are read from their beginning too
            self._consumer.incremental_assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in new]
            )
            self._assigned.update(new)
        # Every partition was paused at the end of the last catch-up (some at their pins).
        self._consumer.resume([TopicPartition(self.topic, p) for p in sorted(self._assigned)])

    def _positions(self, partitions: Iterable[int]) -> dict[int, int]:
        """Where the consumer is in each partition. librdkafka knows none before a partition's
        first record, and none after a seek until the next one (both read as negative): then
        it is where the last seek put it, or 0."""
        wanted = [TopicPartition(self.topic, p) for p in sorted(partitions) if p in self._assigned]
        return {
            tp.partition: tp.offset if tp.offset >= 0 else self._sought.get(tp.partition, 0)
            for tp in self._consumer.position(wanted)
        }

    def _past(self, targets: Mapping[int, int]) -> bool:
        """Whether the store holds records beyond the targets (pins of an earlier batch)."""
        return any(
            position > targets.get(p, 0) for p, position in self._positions(self._assigned).items()
        )

    def _remaining(self, targets: Mapping[int, int]) -> int:
        """Records between each partition's position and its target (gaps of compaction and
        control records included, so an estimate from above)."""
        positions = self._positions(targets)
        return sum(max(end - positions.get(p, 0), 0) for p, end in targets.items())

    def _read(self, count: int, limits: Mapping[int, int] | None) -> int:
        """Apply up to `count` records; with `limits`, none at or beyond a partition's limit:
        the consumer is set back to the limit and paused there."""
        entries, overshot = [], {}
        for message in self._consumer.consume(num_messages=count, timeout=READ_WAIT_SECONDS):
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
                continue
            partition, offset = message.partition() or 0, message.offset() or 0
            if limits is not None and offset >= limits.get(partition, 0):
                overshot[partition] = limits.get(partition, 0)
                continue
            entries.append(tables.entry_of(message))
        self.store.apply(entries)
        for partition, limit in overshot.items():
            self._consumer.seek(TopicPartition(self.topic, partition, limit))
            self._consumer.pause([TopicPartition(self.topic, partition)])
            self._sought[partition] = limit
        return len(entries)


class ReplicaAheadError(Exception):
    """A replica holds records beyond the pins it is asked to read up to."""


_replicas: dict[tuple[str, ...], TableReplica] = {}
_replicas_lock = threading.Lock()


def replica_of(source: TableSource, scope: str = "") -> TableReplica:
    """This worker's replica of the Table for `scope` (the query whose pins it follows, "" for
    none), made (empty) on first use."""
    with _replicas_lock:
        key = (*source.identity, scope)
        replica = _replicas.get(key)
        if replica is None:
            replica = _replicas[key] = TableReplica(source, _store_directory())
        return replica


def caught_up(source: TableSource, pinned: tuple[str, pinning.Pins] | None) -> TableReplica:
    """The replica a task reads: caught up to its batch's pins, or to now without pins.

    A replica past the pins (a batch replayed in a worker that ran a later one) starts over.
    """
    scope, pins = pinned if pinned is not None else ("", {})
    pin = pins.get(source.topic) if pinned is not None else None
    if pinned is not None and pin is None:
        raise KeyError(f"no pin for Table topic {source.topic} in the batch's pins")
    replica = replica_of(source, scope)
    try:
        replica.catch_up(pin)
    except ReplicaAheadError:
        with _replicas_lock:
            _replicas.pop((*source.identity, scope), None)
        replica.close()
        replica = replica_of(source, scope)
        replica.catch_up(pin)
    return replica


def _store_directory() -> Path:
    """A directory of this process in the executor's local storage, removed at exit.

    Spark gives Python workers SPARK_LOCAL_DIRS: on Kubernetes an emptyDir of the executor pod,
    so a killed worker's leftovers go with its pod.
    """
    local = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0] or None
    directory = Path(tempfile.mkdtemp(prefix="rillet-lookup-", dir=local))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


def _look_up(
    batches: Iterator[pa.RecordBatch], *, source: TableSource, key_column: str, value_column: str
) -> Iterator[pa.RecordBatch]:
    """One task: catch the replica up, then add the looked-up value to each record batch."""
    context = TaskContext.get()
    pinned = pinning.decode(context.getLocalProperty(pinning.PINS_PROPERTY) if context else None)
    replica = caught_up(source, pinned)
    for batch in batches:
        keys = batch.column(key_column).to_pylist()
        values = pa.array(replica.lookup(keys), pa.binary())
        yield batch.append_column(value_column, values)


def with_lookups(
    view: DataFrame,
    spec: runspecs.RunSpec,
    item: runspecs.InputSpec,
    avro: Mapping[str, avrorecords.AvroReading] | None = None,
    protobuf: Mapping[str, protorecords.ProtoReading] | None = None,
) -> DataFrame:
    """The topic input's view with a column per lookup, named after its Table input (`avro`,
    `protobuf`: how avro and protobuf Tables' values are decoded, by input name)."""
    for lookup in item.lookups:
        view = with_lookup(
            view,
            spec,
            item,
            lookup,
            (avro or {}).get(lookup.table),
            (protobuf or {}).get(lookup.table),
        )
    return view


def with_lookup(
    view: DataFrame,
    spec: runspecs.RunSpec,
    item: runspecs.InputSpec,
    lookup: runspecs.LookupSpec,
    avro: avrorecords.AvroReading | None = None,
    protobuf: protorecords.ProtoReading | None = None,
) -> DataFrame:
    """The view with the Table's value of each record's key as a column named lookup.table."""
    table = next(i for i in spec.inputs if i.name == lookup.table and i.kind == "table")
    what = f"input {item.name}: lookups[{lookup.table}]"
    missing = [c for c in lookup.key_columns if c not in view.columns]
    if missing:
        raise ValueError(
            f"{what}: keyColumns {', '.join(missing)} not in the view (its columns: "
            f"{', '.join(view.columns)})"
        )
    if lookup.table in view.columns:
        raise ValueError(
            f"{what}: the view already has a column {lookup.table}, the name the looked-up "
            f"value takes: rename the Table's input"
        )
    key_column = f"{records.INTERNAL_PREFIX}key_{lookup.table}"
    value_column = f"{records.INTERNAL_PREFIX}value_{lookup.table}"
    keyed = view.selectExpr(
        "*",
        f"{records.lookup_key_expr(lookup.key_columns, table.key_format, what=what)} "
        f"AS {key_column}",
    )
    source = TableSource(
        config={**spec.kafka_config, "bootstrap.servers": spec.bootstrap_servers},
        topic=table.topic,
        key_format=table.key_format,
        group=f"{spec.consumer_group}.lookups",
    )
    look_up: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]] = functools.partial(
        _look_up, source=source, key_column=key_column, value_column=value_column
    )
    schema = StructType([*keyed.schema.fields, StructField(value_column, BinaryType())])
    joined = keyed.mapInArrow(look_up, schema)
    if table.format == "avro":
        if avro is None:
            raise ValueError(
                f"{what}: Table input {table.name} is avro, and its schemas are not resolved"
            )
        value = avrorecords.decode_value_expr(
            records.quote(value_column), avro, input_name=table.name
        )
    elif table.format == "protobuf":
        if protobuf is None:
            raise ValueError(
                f"{what}: Table input {table.name} is protobuf, and its schemas are not resolved"
            )
        row = protostages.decoded_row(F.col(value_column), protobuf, input_name=table.name)
        return joined.select(
            *(F.col(records.quote(c)) for c in view.columns), row.alias(lookup.table)
        )
    else:
        value = records.lookup_value_expr(value_column, table.format, table.value_schema)
    return joined.selectExpr(
        *(records.quote(c) for c in view.columns), f"{value} AS {records.quote(lookup.table)}"
    )
