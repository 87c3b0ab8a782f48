"""The claims every Rillet release records in Kafka: which release and object owns which topic.

One compacted topic of one partition (`__rillet_claims` by default) is shared by every release
on a Kafka: the key is a Kafka topic's name, the value the JSON claim
(`topicownership.ClaimRecord`), a tombstone when a release lets the topic go. Each operator keeps
the whole map in memory and reads only what was appended since its last read (`refresh`, once
per batch of the syncer: a watermark request, and records only when some were written), so a
batch of thousands of topics costs no more than one. A topic config can not carry a claim: Kafka
refuses config names it does not know (decision 022).

All blocking client calls run on one thread of the store's own, one after the other: the two
lanes of the syncer share the store, and its consumer is not to be used from two threads at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from rillet.kafka.errors import KafkaUnavailableError
from rillet.reconcile import topicownership
from rillet.reconcile.topicownership import ClaimRecord

DEFAULT_TOPIC = "__rillet_claims"


class ClaimStore:
    """The claims topic, read incrementally; `close` when done."""

    def __init__(
        self, client_config: Mapping[str, Any], *, topic: str = DEFAULT_TOPIC, timeout: float = 15.0
    ) -> None:
        self._config = {**client_config, "log_level": 3}
        self._topic = topic
        self._timeout = timeout
        self._records: dict[str, ClaimRecord] = {}
        self._position = 0
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="rillet-claims"
        )

    def get(self, kafka_name: str) -> ClaimRecord | None:
        """The claim last read for a topic (call `refresh` first for the latest)."""
        return self._records.get(kafka_name)

    async def refresh(self) -> None:
        """Read what was recorded since the last read; KafkaUnavailableError if Kafka is not
        reachable (then nothing can be decided about ownership)."""
        await self._run(self._catch_up)

    async def record(self, claims: Mapping[str, ClaimRecord | None]) -> None:
        """Record claims (None: release the topic), applied to the view at once (not read back)."""
        if claims:
            await self._run(self._write, dict(claims))

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)
        if self._consumer is not None:
            self._consumer.close()

    async def _run(self, call: Any, *args: Any) -> None:
        await asyncio.get_running_loop().run_in_executor(self._thread, call, *args)

    def _start(self) -> Consumer:
        """Create the topic if missing, and the clients (once)."""
        if self._consumer is not None:
            return self._consumer
        admin = AdminClient(self._config)
        try:
            future = admin.create_topics([self._new_topic(admin)], request_timeout=self._timeout)
            future[self._topic].result(timeout=self._timeout)
        except Exception as error:  # one that exists is what we want
            code = error.args[0].code() if error.args and hasattr(error.args[0], "code") else None
            if code != KafkaError.TOPIC_ALREADY_EXISTS:
                raise KafkaUnavailableError(f"claims topic {self._topic}: {error}") from error
        consumer = Consumer(
            {
                **self._config,
                "group.id": "rillet.claims",  # never committed: each operator reads it all
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                # A fetch still open when the partition is unassigned delays the next watermark
                # request by up to this (500 ms by default); fetches run only while catching up.
                "fetch.wait.max.ms": 10,
            }
        )
        self._producer = Producer({**self._config, "acks": "all", "linger.ms": 5})
        self._consumer = consumer
        return consumer

    def _new_topic(self, admin: AdminClient) -> NewTopic:
        """The claims topic as created: replicated as Kafka's own internal topics are (three
        copies, two in sync for a write) where there are brokers enough, so that one broker
        lost leaves the claims readable and writable."""
        brokers = len(admin.list_topics(timeout=self._timeout).brokers)
        replicas = max(1, min(3, brokers))
        return NewTopic(
            self._topic,
            num_partitions=1,
            replication_factor=replicas,
            config={
                "cleanup.policy": "compact",
                "min.compaction.lag.ms": "0",
                "min.insync.replicas": str(max(1, replicas - 1)),
            },
        )

    def _high(self, consumer: Consumer) -> int:
        try:
            _, high = consumer.get_watermark_offsets(
                TopicPartition(self._topic, 0), timeout=self._timeout
            )
        except Exception as error:
            raise KafkaUnavailableError(f"claims topic {self._topic}: {error}") from error
        return int(high)

    def _catch_up(self) -> None:
        """Read from the last position to the end. The partition is assigned only meanwhile: a
        consumer fetching at the end holds a fetch open on the broker (fetch.wait.max.ms), and
        the broker answers the next watermark request on that connection only after it."""
        consumer = self._start()
        high = self._high(consumer)
        if self._position >= high:
            return
        start = self._position or OFFSET_BEGINNING
        consumer.assign([TopicPartition(self._topic, 0, start)])
        try:
            self._read_to(consumer, high)
        finally:
            consumer.unassign()

    def _read_to(self, consumer: Consumer, high: int) -> None:
        deadline = time.monotonic() + self._timeout
        while self._position < high:
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(f"claims topic {self._topic}: read timed out")
            message = consumer.poll(0.5)
            if message is None:
                continue
            problem = message.error()
            if problem is not None:
                if problem.code() == KafkaError._PARTITION_EOF:
                    # Compaction may leave a gap before the end: at the end, all is read. An end
                    # event from before the latest records were written is stale.
                    if (message.offset() or 0) >= high:
                        self._position = high
                        break
                    continue
                raise KafkaUnavailableError(f"claims topic {self._topic}: {problem.str()}")
            if (message.offset() or 0) < self._position:
                continue  # recorded by this store, and applied as it was written
            key = (message.key() or b"").decode()
            claim = topicownership.decode(message.value())
            if claim is None:
                self._records.pop(key, None)
            else:
                self._records[key] = claim
            self._position = (message.offset() or 0) + 1

    def _write(self, claims: dict[str, ClaimRecord | None]) -> None:
        self._start()
        assert self._producer is not None
        failures: list[str] = []
        offsets: set[int] = set()

        def delivered(error: KafkaError | None, message: Any) -> None:
            if error is not None:
                failures.append(error.str())
            else:
                offsets.add(message.offset())

        for name, claim in claims.items():
            value = claim.encode() if claim is not None else None
            self._producer.produce(
                self._topic, key=name.encode(), value=value, on_delivery=delivered
            )
        if self._producer.flush(self._timeout) or failures:
            raise KafkaUnavailableError(
                f"claims topic {self._topic}: not recorded ({'; '.join(failures) or 'timed out'})"
            )
        consumer = self._start()
        high = self._high(consumer)
        if offsets == set(range(self._position, high)):
            # Nothing but these records since the last read: apply them without reading them
            # back (a fetch at the end of the topic can wait fetch.wait.max.ms for them).
            for name, claim in claims.items():
                if claim is None:
                    self._records.pop(name, None)
                else:
                    self._records[name] = claim
            self._position = high
        else:
            self._catch_up()
