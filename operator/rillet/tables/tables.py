"""The Table read path: the latest value of a key, read from the Table's compacted topic.

`rillet table get <table> <key>` reads the changelog topic from its beginning up to the high
watermarks it had when the command started, keeps the last record per key (by offset within a
partition, by timestamp across partitions) and treats a tombstone as absent: what compaction
converges to, without waiting for it. The read is bounded, so it ends even while an App writes.

Keys are compared according to the Table's key format: string and bytes exactly; json as JSON
values, where an object matches every stored key holding at least its fields (so
`{"page": "/home"}` finds every window of a windowed Table's page).
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition

from rillet.api.v1alpha1 import fields
from rillet.tables import watermarks


@dataclasses.dataclass(frozen=True, kw_only=True)
class Entry:
    """One record of a changelog topic."""

    key: bytes | None
    value: bytes | None
    partition: int
    offset: int
    timestamp: int


def _newer(candidate: Entry, kept: Entry) -> bool:
    if candidate.partition == kept.partition:
        return candidate.offset > kept.offset
    return (candidate.timestamp, candidate.partition) > (kept.timestamp, kept.partition)


def latest_per_key(entries: Iterable[Entry]) -> dict[bytes, Entry]:
    """The latest record per key, tombstones (and key-less records) left out."""
    latest: dict[bytes, Entry] = {}
    for entry in entries:
        if entry.key is None:
            continue
        kept = latest.get(entry.key)
        if kept is None or _newer(entry, kept):
            latest[entry.key] = entry
    return {key: entry for key, entry in latest.items() if entry.value is not None}


def _json(data: bytes | str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def match_all_problem(wanted: str, key_format: fields.Format) -> str | None:
    """Why `wanted` is refused as a lookup key, or None: a JSON object without fields is a
    partial key that every object key matches, the whole Table in one answer."""
    if key_format == "json" and _json(wanted) == {}:
        return (
            f"the key {wanted} matches every key of the Table: give at least one field of the "
            f"key, or list entries with ?prefix= and a limit"
        )
    return None


def key_matches(stored: bytes, wanted: str, key_format: fields.Format) -> bool:
    """Whether a stored key is the one asked for (a JSON object may give only some fields)."""
    if key_format != "json":
        return stored == wanted.encode()
    want, have = _json(wanted), _json(stored)
    if isinstance(want, dict) and isinstance(have, dict):
        return all(k in have and have[k] == v for k, v in want.items())
    return want is not None and want == have


def same_key(stored: bytes | None, wanted: str, key_format: fields.Format) -> bool:
    """Whether a stored key is exactly `wanted` (as JSON values for json keys)."""
    if stored is None:
        return False
    if key_format != "json":
        return stored == wanted.encode()
    want = _json(wanted)
    return want is not None and want == _json(stored)


def lookup(latest: Mapping[bytes, Entry], wanted: str, key_format: fields.Format) -> list[Entry]:
    """The latest entries whose key matches `wanted`, ordered by key."""
    return [latest[key] for key in sorted(latest) if key_matches(key, wanted, key_format)]


def read_changelog(
    *,
    bootstrap_servers: str,
    topic: str,
    kafka_config: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> list[Entry]:
    """Every record of `topic` up to the high watermarks it has now (no group is joined)."""
    consumer = _consumer(bootstrap_servers, kafka_config)
    try:
        return _read_all(consumer, topic, deadline=time.monotonic() + timeout)
    finally:
        consumer.close()


def watch_changelog(
    *,
    bootstrap_servers: str,
    topic: str,
    kafka_config: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    new_partitions_every: float = 5.0,
) -> tuple[list[Entry], Iterator[Entry]]:
    """Every record of `topic` up to its high watermarks now, and then, endlessly, each record
    written after them: one consumer reads both, so no record falls in between. Partitions added
    to the topic meanwhile are read from their beginning (checked every `new_partitions_every`
    seconds)."""
    consumer = _consumer(bootstrap_servers, kafka_config)
    try:
        entries = _read_all(consumer, topic, deadline=time.monotonic() + timeout)
    except BaseException:
        consumer.close()
        raise

    def later() -> Iterator[Entry]:
        next_check = time.monotonic() + new_partitions_every
        try:
            while True:
                yield from _consume(consumer)
                if time.monotonic() >= next_check:
                    _assign_new_partitions(consumer, topic)
                    next_check = time.monotonic() + new_partitions_every
        finally:
            consumer.close()

    return entries, later()


def _assign_new_partitions(consumer: Consumer, topic: str) -> None:
    """Add the topic's partitions made since the assignment, from their beginning; the others
    keep their positions."""
    described = consumer.list_topics(topic, timeout=10).topics.get(topic)
    if described is None or described.error is not None:
        return
    assigned = {tp.partition for tp in consumer.assignment()}
    new = sorted(set(described.partitions) - assigned)
    if new:
        positions = consumer.position([TopicPartition(topic, p) for p in sorted(assigned)])
        # A partition nothing was read from yet has no position: all its records are new.
        kept = [
            tp if tp.offset >= 0 else TopicPartition(topic, tp.partition, OFFSET_BEGINNING)
            for tp in positions
        ]
        consumer.assign([*kept, *(TopicPartition(topic, p, OFFSET_BEGINNING) for p in new)])


def _consumer(bootstrap_servers: str, kafka_config: Mapping[str, str] | None) -> Consumer:
    return Consumer(
        {
            **(kafka_config or {}),
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"rillet.table-get.{uuid.uuid4().hex}",  # never committed, never created
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )


def _read_all(consumer: Consumer, topic: str, *, deadline: float) -> list[Entry]:
    metadata = consumer.list_topics(topic, timeout=max(1.0, deadline - time.monotonic()))
    described = metadata.topics.get(topic)
    if described is None or described.error is not None:
        raise LookupError(f"topic {topic} not found")
    ends: dict[int, int] = {}
    for partition in described.partitions:
        low, high = watermarks.watermarks(consumer, topic, partition, timeout=10)
        if high > low:
            ends[partition] = high
    # Every partition, the empty ones too: a watch then sees their first records.
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in described.partitions])
    entries: list[Entry] = []
    while ends:
        if time.monotonic() > deadline:
            raise TimeoutError(f"reading {topic}: partitions {sorted(ends)} not read to the end")
        entries.extend(_consume(consumer))
        # Positions, not last offsets: compaction and control records leave gaps before the end.
        for position in consumer.position([TopicPartition(topic, p) for p in ends]):
            if position.offset >= ends[position.partition]:
                del ends[position.partition]
    return entries


def entry_of(message: Message) -> Entry:
    """A consumed record as an Entry (a message without error)."""
    return Entry(
        key=message.key(),
        value=message.value(),
        partition=message.partition() or 0,
        offset=message.offset() or 0,
        timestamp=message.timestamp()[1],
    )


def _consume(consumer: Consumer) -> list[Entry]:
    """The records one poll brings (up to 10,000, waiting at most half a second)."""
    entries = []
    for message in consumer.consume(num_messages=10_000, timeout=0.5):
        error = message.error()
        if error is not None:
            raise KafkaException(error)
        entries.append(entry_of(message))
    return entries
