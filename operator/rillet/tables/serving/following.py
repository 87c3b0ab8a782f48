"""Following a Table's topic into its store, from the beginning, for as long as the server runs.

The follower is caught up once its position in every partition has reached the high watermark
that partition had when it started: from then on a lookup sees every record written before the
server became Ready. It then keeps consuming, and every `refresh_seconds` it:
- assigns partitions added to the topic since (from their beginning);
- drops from the store what a partition no longer holds below its log start offset (the
  retention of a windowed Table: expired windows leave no tombstone);
- measures its lag, the records written but not yet in the store, per partition.

A Kafka error is logged and consuming goes on: the client reconnects by itself, and the server
keeps answering from what it holds (the lag metric shows it falling behind).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from rillet.tables import tables, watermarks
from rillet.tables.tablestore import TableStore

log = logging.getLogger(__name__)


class TableFollower(threading.Thread):
    """Consumes `topic` into `store` on its own thread; `caught_up` is set once it has read
    everything the topic held when it started."""

    def __init__(
        self,
        *,
        kafka_config: Mapping[str, Any],
        topic: str,
        store: TableStore,
        refresh_seconds: float = 10.0,
    ) -> None:
        super().__init__(name=f"follow-{topic}", daemon=True)
        self.topic = topic
        self.store = store
        self.refresh_seconds = refresh_seconds
        self.caught_up = threading.Event()
        self.lag: dict[int, int] = {}
        self.keys = 0  # counted here, at each refresh: a count scans the store
        self._stopping = threading.Event()
        self._consumer = Consumer(
            {
                **kafka_config,
                # A group id is required to consume, but the follower never joins or commits:
                # it assigns partitions itself and starts from the beginning every time.
                "group.id": f"rillet.table-server.{topic}",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
            }
        )
        self._targets: dict[int, int] = {}
        self._assigned: set[int] = set()

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        try:
            while not self._stopping.is_set():
                try:
                    self._start()
                    break
                except KafkaException as error:
                    log.warning("starting to follow %s: %s; trying again", self.topic, error)
                    self._targets.clear()
                    self._stopping.wait(2)
            next_refresh = time.monotonic() + self.refresh_seconds
            while not self._stopping.is_set():
                self._poll()
                if time.monotonic() >= next_refresh:
                    try:
                        self._refresh()
                    except KafkaException as error:  # a broker away: the next refresh retries
                        log.warning("refreshing %s: %s", self.topic, error)
                    next_refresh = time.monotonic() + self.refresh_seconds
        except Exception:
            log.exception("following topic %s stopped", self.topic)
            raise
        finally:
            self._consumer.close()

    def _start(self) -> None:
        partitions = self._partitions()
        to_read = 0
        for partition in partitions:
            low, high = self._watermarks(partition)
            if high > low:
                self._targets[partition] = high
                to_read += high - low
        self._assign(partitions)
        log.info(
            "following %s: %d partitions, up to %d records to read before serving",
            self.topic,
            len(partitions),
            to_read,
        )
        self._check_caught_up()

    def _partitions(self) -> list[int]:
        """The topic's partitions; waits while the topic or Kafka is not there."""
        while not self._stopping.is_set():
            try:
                metadata = self._consumer.list_topics(self.topic, timeout=10)
            except KafkaException as error:
                log.warning("Kafka does not answer (%s); asking again", error)
                continue
            described = metadata.topics.get(self.topic)
            if described is not None and described.error is None and described.partitions:
                return sorted(described.partitions)
            log.warning("topic %s not found yet; waiting for it", self.topic)
            self._stopping.wait(2)
        return []

    def _watermarks(self, partition: int) -> tuple[int, int]:
        return watermarks.watermarks(self._consumer, self.topic, partition, timeout=10)

    def _assign(self, partitions: list[int]) -> None:
        new = [p for p in partitions if p not in self._assigned]
        if new:
            self._consumer.incremental_assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in new]
            )
            self._assigned.update(new)

    def _poll(self) -> None:
        entries = []
        for message in self._consumer.consume(num_messages=10_000, timeout=0.5):
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    log.warning("reading %s: %s", self.topic, error)
                continue
            entries.append(tables.entry_of(message))
        if entries:
            self.store.apply(entries)
        if not self.caught_up.is_set():
            self._check_caught_up()

    def _positions(self) -> dict[int, int]:
        assigned = [TopicPartition(self.topic, p) for p in sorted(self._assigned)]
        return {tp.partition: tp.offset for tp in self._consumer.position(assigned)}

    def _check_caught_up(self) -> None:
        # Positions, not last offsets: compaction and control records leave gaps before the end.
        positions = self._positions()
        behind = {p for p, end in self._targets.items() if positions.get(p, -1) < end}
        if not behind:
            self.keys = self.store.count()
            self.caught_up.set()
            log.info("caught up with %s: %d keys", self.topic, self.keys)

    def _refresh(self) -> None:
        self._assign(self._partitions())
        positions = self._positions()
        starts: dict[int, int] = {}
        for partition in sorted(self._assigned):
            low, high = self._watermarks(partition)
            starts[partition] = low
            # Before its first record a partition's position is unknown (negative): all behind.
            self.lag[partition] = high - max(positions.get(partition, low), low)
        dropped = self.store.forget_below(starts)
        self.keys = self.store.count()
        if dropped:
            log.info("dropped %d keys of %s below their log start (retention)", dropped, self.topic)
