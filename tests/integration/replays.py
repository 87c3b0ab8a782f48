"""Helpers of the tests that make a `rillet run` driver run a batch again, and read what it wrote.

A batch runs again when its driver dies after the batch was logged (offsets/N in its query's
checkpoint) and before it was committed (commits/N): the next driver on the checkpoint runs
batch N again with the offsets logged for it. A test gets there in one of two ways:
- it pauses the driver's process group (SIGSTOP) to look at its checkpoint and at Kafka without
  the driver moving meanwhile, and kills it (SIGKILL) there when the batch is where it wants;
- or it takes a batch's commit ahead of the driver (`take_next_commit`), as a second driver on
  the same checkpoint would: Spark then writes that batch, fails to commit it, and the driver
  exits. No signal, and no race with the batch. What they then check is read from
Kafka record by record (`raw_records`): no record collapsed into another, as a count of keys or
offsets would.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from rillet.tables import watermarks


def produce_located(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[str | bytes | None, str | bytes | None]],
    *,
    partitions: int,
) -> list[tuple[int, int]]:
    """Produce (key, value) records round-robin over `partitions`; where Kafka put each one,
    (partition, offset), from its acknowledgement, in the order given."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    located: dict[int, tuple[int, int]] = {}

    def acknowledged(index: int, error: KafkaError | None, message: Any) -> None:
        assert error is None, error
        located[index] = (message.partition(), message.offset())

    for index, (key, value) in enumerate(records):
        producer.produce(
            topic,
            key=key,
            value=value,
            partition=index % partitions,
            on_delivery=functools.partial(acknowledged, index),
        )
        if index % 10_000 == 9_999:
            producer.flush(30)
    assert producer.flush(30) == 0
    return [located[index] for index in range(len(located))]


@dataclasses.dataclass(frozen=True)
class RawRecord:
    """One record of a topic as a consumer got it."""

    key: bytes | None
    value: bytes | None
    headers: dict[str, str]
    partition: int
    offset: int


def raw_records(
    bootstrap: str, topic: str, *, isolation: str = "read_committed", timeout: float = 60
) -> list[RawRecord]:
    """Every record of a topic up to its end for `isolation` when called (read_committed: the
    last stable offset; aborted records left out), each as consumed: none collapsed, none
    de-duplicated."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test.{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        # With read_committed, a consumer's end is the last stable offset (watermarks asks
        # Kafka with the consumer's isolation level).
        ends = {p: watermarks.watermarks(consumer, topic, p, timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        found: list[RawRecord] = []
        deadline = time.monotonic() + timeout
        # Positions, not a count of records: a transaction's markers take offsets too, and
        # aborted records are skipped.
        filled = [TopicPartition(topic, p) for p in partitions if ends[p] > 0]
        while any(
            position.offset < ends[position.partition] for position in consumer.position(filled)
        ):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"read {len(found)} records of {topic}, not to its end {ends}, in {timeout}s"
                )
            for message in consumer.consume(num_messages=1000, timeout=1):
                assert message.error() is None, message.error()
                raw = message.headers() or []
                pairs = raw.items() if isinstance(raw, dict) else raw  # consumers get a list
                headers = {
                    key: value.decode() if isinstance(value, bytes) else value
                    for key, value in pairs
                    if value is not None
                }
                found.append(
                    RawRecord(
                        message.key(),
                        message.value(),
                        headers,
                        message.partition() or 0,
                        message.offset() or 0,
                    )
                )
        return found
    finally:
        consumer.close()


def open_transaction(bootstrap: str, topic: str) -> bool:
    """Whether records of a transaction not yet committed or aborted sit in the topic: its
    read_uncommitted end (the high watermark) beyond its read_committed one (the last stable
    offset) in some partition."""
    ends = {
        isolation: _ends_as(bootstrap, topic, isolation)
        for isolation in ("read_committed", "read_uncommitted")
    }
    return any(
        written > stable
        for written, stable in zip(ends["read_uncommitted"], ends["read_committed"], strict=True)
    )


def _ends_as(bootstrap: str, topic: str, isolation: str) -> list[int]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test.{uuid.uuid4().hex}",
            "isolation.level": isolation,
        }
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        return [watermarks.watermarks(consumer, topic, p, timeout=10)[1] for p in partitions]
    finally:
        consumer.close()


def batch_ids(query: Path, log: str) -> list[int]:
    """The batch ids in a streaming query's checkpoint log `log` (`offsets` or `commits`)."""
    directory = query / log
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def logged_offsets(query: Path, batch: int) -> dict[str, dict[int, int]]:
    """The offsets, topic -> partition -> offset (exclusive), a query's batch reads its Kafka
    sources up to, from its offset log entry: a version line, the batch's metadata, then a
    line per source."""
    lines = (query / "offsets" / str(batch)).read_text().splitlines()
    found: dict[str, dict[int, int]] = {}
    for line in lines[2:]:
        for topic, ends in json.loads(line).items():
            found[topic] = {int(p): int(o) for p, o in ends.items()}
    return found


@dataclasses.dataclass(frozen=True)
class TakenCommit:
    """A commit-log entry written for a batch its query has not run yet."""

    batch: int
    entry: Path

    def release(self) -> None:
        """Remove the entry (with the driver stopped): the next driver runs the batch again."""
        self.entry.unlink()


def take_next_commit(query: Path) -> TakenCommit:
    """Commit the batch after the last one `query` has logged, before the query gets there: when
    it has run that batch, Spark finds the batch committed by another writer and fails the query
    (CONCURRENT_STREAM_LOG_UPDATE), its output written and its commit not. The entry is a copy
    of the last commit, written whole (a rename): Spark reads it as a commit, never half of one."""
    done = batch_ids(query, "commits")
    batch = max(batch_ids(query, "offsets")) + 1
    entry = query / "commits" / str(batch)
    staged = query / f".taken-{batch}"
    staged.write_bytes((query / "commits" / str(done[-1])).read_bytes())
    staged.rename(entry)
    return TakenCommit(batch, entry)


def paused_if(driver: subprocess.Popen[bytes], probe: Callable[[], bool]) -> bool:
    """SIGSTOP the driver's process group and ask `probe`; True leaves it paused (to be killed
    where it stands), False resumes it (SIGCONT). A driver that exited fails at once, with its
    exit status (a wait for a moment it can no longer reach would only time out)."""
    if driver.poll() is not None:
        raise AssertionError(f"the driver exited with {driver.returncode} before the moment")
    os.killpg(driver.pid, signal.SIGSTOP)
    try:
        found = probe()
    except BaseException:
        os.killpg(driver.pid, signal.SIGCONT)
        raise
    if not found:
        os.killpg(driver.pid, signal.SIGCONT)
    return found


def kill(driver: subprocess.Popen[bytes]) -> None:
    """SIGKILL the driver's process group (Python and its JVM), paused or not."""
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait(timeout=30)


def holds(probe: Callable[[], bool], *, seconds: float) -> bool:
    """Whether `probe` is true now and stays true, asked again and again, for `seconds`."""
    deadline = time.monotonic() + seconds
    while probe():
        if time.monotonic() >= deadline:
            return True
    return False
