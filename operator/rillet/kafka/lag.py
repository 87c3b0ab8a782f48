"""How far each App's consumer group is behind its input topics, for many Apps at once.

The runtime commits the offsets an App has processed to its consumer group
(`naming.consumer_group`); lag is, per partition, the latest offset minus the committed one. A
scaling pass asks about every running App in one call, answered in worker threads:
- one describe of all input topics (their partition counts);
- the committed offsets of each consumer group, fetched in parallel, each through a consumer of
  that group kept for as long as its App is scaled (it never subscribes, so it never joins the
  group). Not through the AdminClient's list_consumer_group_offsets: librdkafka (up to 2.16 at
  least) dereferences a NULL consumer group when that request meets NOT_COORDINATOR or a
  coordinator still loading (a fresh cluster, a broker restart), and the whole process dies of
  SIGSEGV (librdkafka issue #5040). A consumer handles those answers as its own;
- in parallel: one list-offsets of every partition's latest offset, and one of the earliest
  offset of partitions a group has not committed yet (partitions added to a topic since its
  last batch: the App reads them from the start, so all of it is lag).

Failures are values: a topic Kafka cannot describe has unknown partitions, a group whose offsets
cannot be read has unknown lag, and only its App's status says so. A group that has committed
nothing for a topic yet (a new App, before its first batch ends) is behind by the whole topic
when it reads from the earliest offsets; reading from the latest ones, its lag is unknown
rather than a guess.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

log = logging.getLogger(__name__)

Partition = tuple[str, int]
# Consumer groups whose commits are read at once (each read is one blocking request).
COMMIT_READERS = 8


@dataclass(frozen=True)
class TopicLag:
    """One input topic of one consumer group: its partitions and the records behind."""

    partitions: int | None  # None: Kafka did not describe the topic
    lag: int | None  # None: nothing committed for the topic yet, or offsets not readable


def topic_lag(
    partitions: int | None,
    *,
    latest: Mapping[int, int],
    committed: Mapping[int, int],
    earliest: Mapping[int, int],
    from_start: bool = False,
) -> int | None:
    """Records behind over a topic's partitions: latest minus committed offset each.

    A partition without a commit counts from its earliest offset (the App will read it all).
    None when the partitions are unknown, nothing of the topic is committed yet (unless the App
    reads it `from_start`: then all of it is behind), or an offset needed is missing.
    """
    if not partitions or not (committed or from_start):
        return None
    total = 0
    for partition in range(partitions):
        end = latest.get(partition)
        start = committed.get(partition, earliest.get(partition))
        if end is None or start is None:
            return None
        total += max(end - start, 0)
    return total


def uncommitted_partitions(
    wanted: Mapping[str, Iterable[str]],
    partitions: Mapping[str, int | None],
    committed: Mapping[str, Mapping[Partition, int] | None],
    from_start: Collection[tuple[str, str]],
) -> list[Partition]:
    """The partitions whose lag counts from their earliest offset, for some group: those it has
    not committed in a topic it has (new partitions), or in a topic it reads from the start."""
    found = set()
    for group, topics in wanted.items():
        commits = committed.get(group)
        if commits is None:  # not readable: the lag is unknown anyway
            continue
        for topic in topics:
            if _has_commits(commits, topic) or (group, topic) in from_start:
                count = partitions.get(topic) or 0
                found |= {(topic, p) for p in range(count) if (topic, p) not in commits}
    return sorted(found)


def _value(future: concurrent.futures.Future[Any]) -> Any:
    """The future's result, or None if it failed or never ended (reported as unknown)."""
    if not future.done():
        return None
    error = future.exception()
    if error is not None:
        log.debug("a lag query failed: %s", error)
        return None
    return future.result()


class LagReader:
    """Reads partitions and lag of many (consumer group, topic) pairs: topics and offsets through
    one AdminClient, commits through a consumer per group."""

    def __init__(self, client_config: Mapping[str, Any], *, timeout: float = 10.0) -> None:
        # Silenced like TopicAdmin's: while Kafka is down the statuses say so, every 2 seconds.
        self._config = {**client_config, "log_level": 3}
        self._client = AdminClient(self._config)
        self._timeout = timeout
        self._consumers: dict[str, Consumer] = {}  # per consumer group, only to read its commits
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=COMMIT_READERS, thread_name_prefix="rillet-lag"
        )

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for group in list(self._consumers):
            self._consumers.pop(group).close()

    async def observe(
        self,
        wanted: Mapping[str, Iterable[str]],
        *,
        from_start: Collection[tuple[str, str]] = (),
    ) -> dict[tuple[str, str], TopicLag]:
        """For each consumer group, the partitions and lag of each of its topics.

        `from_start`: the (group, topic) pairs read from the earliest offsets when nothing is
        committed yet.
        """
        pairs = {group: tuple(dict.fromkeys(topics)) for group, topics in wanted.items()}
        if not any(pairs.values()):
            return {}
        return await asyncio.to_thread(self._observe, pairs, frozenset(from_start))

    def _observe(
        self, wanted: Mapping[str, tuple[str, ...]], from_start: frozenset[tuple[str, str]]
    ) -> dict[tuple[str, str], TopicLag]:
        topics = sorted({topic for group_topics in wanted.values() for topic in group_topics})
        described = self._client.describe_topics(
            TopicCollection(topics), request_timeout=self._timeout
        )
        self._wait(list(described.values()))
        partitions = {topic: _partition_count(_value(described[topic])) for topic in topics}
        self._forget_groups_but(wanted.keys())
        fetched = {
            group: self._pool.submit(
                self._committed, self._consumer(group), group_topics, partitions
            )
            for group, group_topics in wanted.items()
        }
        self._wait(list(fetched.values()))
        committed = {group: _value(future) for group, future in fetched.items()}

        every = [(t, p) for t, count in partitions.items() for p in range(count or 0)]
        uncommitted = uncommitted_partitions(wanted, partitions, committed, from_start)
        latest_spec: OffsetSpec = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        earliest_spec: OffsetSpec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        latest_futures = self._list_offsets(every, latest_spec)
        earliest_futures = self._list_offsets(uncommitted, earliest_spec)
        self._wait([*latest_futures.values(), *earliest_futures.values()])
        latest, earliest = _offsets(latest_futures), _offsets(earliest_futures)

        return {
            (group, topic): TopicLag(
                partitions=partitions[topic],
                lag=topic_lag(
                    partitions[topic],
                    latest=latest.get(topic, {}),
                    committed=_of_topic(committed[group], topic),
                    earliest=earliest.get(topic, {}),
                    from_start=committed[group] is not None and (group, topic) in from_start,
                ),
            )
            for group, group_topics in wanted.items()
            for topic in group_topics
        }

    def _consumer(self, group: str) -> Consumer:
        """The group's consumer (made here, in the pass's thread: the pool only uses them)."""
        if group not in self._consumers:
            self._consumers[group] = Consumer(
                {**self._config, "group.id": group, "enable.auto.commit": False}
            )
        return self._consumers[group]

    def _committed(
        self, consumer: Consumer, topics: Iterable[str], partitions: Mapping[str, int | None]
    ) -> dict[Partition, int] | None:
        """The consumer's group's committed offsets in these topics; None when unreadable."""
        wanted = [TopicPartition(t, p) for t in topics for p in range(partitions.get(t) or 0)]
        if not wanted:
            return {}
        try:
            found = consumer.committed(wanted, timeout=self._timeout)
        except KafkaException as error:
            log.debug("reading commits failed: %s", error)
            return None
        return {
            (tp.topic, tp.partition): tp.offset
            for tp in found
            if tp.offset >= 0 and tp.error is None
        }

    def _forget_groups_but(self, groups: Collection[str]) -> None:
        """Close the consumers of groups no longer asked about (their Apps gone or stopped)."""
        for group in self._consumers.keys() - set(groups):
            self._consumers.pop(group).close()

    def _list_offsets(
        self, partitions: Iterable[Partition], spec: OffsetSpec
    ) -> dict[Partition, concurrent.futures.Future[Any]]:
        request = {TopicPartition(topic, partition): spec for topic, partition in partitions}
        if not request:
            return {}
        futures = self._client.list_offsets(request, request_timeout=self._timeout)
        return {(tp.topic, tp.partition): future for tp, future in futures.items()}

    def _wait(self, futures: list[concurrent.futures.Future[Any]]) -> None:
        # librdkafka times requests out itself; the margin only guards against a lost callback.
        concurrent.futures.wait(futures, timeout=self._timeout + 5)


def _partition_count(description: Any) -> int | None:
    return len(description.partitions) if description is not None else None


def _has_commits(commits: Mapping[Partition, int] | None, topic: str) -> bool:
    return commits is not None and any(t == topic for t, _ in commits)


def _of_topic(commits: Mapping[Partition, int] | None, topic: str) -> dict[int, int]:
    return {p: offset for (t, p), offset in (commits or {}).items() if t == topic}


def _offsets(
    futures: Mapping[Partition, concurrent.futures.Future[Any]],
) -> dict[str, dict[int, int]]:
    found: dict[str, dict[int, int]] = {}
    for (topic, partition), future in futures.items():
        info = _value(future)
        if info is not None and info.offset >= 0:
            found.setdefault(topic, {})[partition] = info.offset
    return found
