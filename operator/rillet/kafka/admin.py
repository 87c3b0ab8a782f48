"""The only code that calls Kafka's admin API: batched describe, create, grow, alter, delete.

Every call takes many topics and returns a result per topic: a per-topic failure is a value
(`KafkaFailure`), not an exception, so one bad topic never hides the others' results. Only a
cluster that cannot be reached at all raises `KafkaUnavailableError` (`errors` tells which
failures mean that).

One topic must not fail the others before Kafka answers either: each topic's part of a request
is checked and built on its own, and a request the client refuses whole is sent again topic by
topic (`topicrequests`).

A TopicAdmin is one AdminClient (a connection per broker, whose requests a broker serves in
turn) and threads of its own that wait for the answers: the syncer gives each lane its own, so an
apply queues behind neither the resync's requests nor the Kubernetes writes (`kafka.syncing`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from confluent_kafka import KafkaError, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from rillet.kafka import topicrequests
from rillet.kafka.errors import (
    EXPLAINING,
    LOST_BROKER,
    REFUSING,
    KafkaUnavailableError,
    already_exists,
    error_code,
    is_gone,
    is_unreachable,
)
from rillet.kafka.topicrequests import KafkaFailure
from rillet.reconcile.topicconfigs import ConfigDiff
from rillet.reconcile.topics import DesiredTopic, ObservedTopic

# Kafka refuses a CreateTopics request of more than 10,000 partitions in all.
MAX_PARTITIONS_PER_CREATE = 10_000

# How often a request in flight checks whether Kafka refused the client's login meanwhile
# (`errors.REFUSING`): the request itself would only time out, after the request timeout.
_REFUSAL_CHECK_SECONDS = 0.2
# Threads per TopicAdmin that wait for Kafka's answers, one per request in flight: its lane's
# batch, describes of changes not shown yet, deletions (answered in milliseconds). Not asyncio's
# default executor: it runs every status patch and Event too (`k8s.writing`), and an apply's
# waits queued behind a resync's writes there for 2 to 7 s.
WAITING_THREADS = 8
_DYNAMIC_TOPIC_CONFIG = ConfigSource.DYNAMIC_TOPIC_CONFIG.value

K = TypeVar("K")
T = TypeVar("T")


async def _settle(
    futures: Mapping[K, concurrent.futures.Future[Any]],
    refused: Callable[[], bool],
    waiting: concurrent.futures.Executor,
) -> dict[K, Any]:
    """Each future's result or exception; raise KafkaUnavailableError if all failed unreachable,
    or as soon as `refused()` says Kafka refused the client (no answer will come)."""
    # One thread of `waiting` waits for the whole batch: wrapping each future into the event loop
    # costs a loop wake-up per topic, more CPU than the describe itself for a 1,000-topic resync.
    wait = functools.partial(_wait_unless_refused, list(futures.values()), refused)
    if not await asyncio.get_running_loop().run_in_executor(waiting, wait):
        raise KafkaUnavailableError("no request was answered")
    settled = {key: future.exception() or future.result() for key, future in futures.items()}
    errors = [r for r in settled.values() if isinstance(r, BaseException)]
    if errors and len(errors) == len(settled) and all(is_unreachable(e) for e in errors):
        raise KafkaUnavailableError(
            topicrequests.failure_of(errors[0]).message,
            lost_broker=all(error_code(e) in LOST_BROKER for e in errors),
        )
    return settled


def _wait_unless_refused(
    futures: Sequence[concurrent.futures.Future[Any]], refused: Callable[[], bool]
) -> bool:
    """Wait for every future; False if `refused()` became true first."""
    while concurrent.futures.wait(futures, timeout=_REFUSAL_CHECK_SECONDS).not_done:
        if refused():
            return False
    return True


def split_creates(topics: Sequence[DesiredTopic]) -> Iterator[list[DesiredTopic]]:
    """Groups of topics each under Kafka's per-request partition limit."""
    group: list[DesiredTopic] = []
    partitions = 0
    for topic in topics:
        if group and partitions + topic.partitions > MAX_PARTITIONS_PER_CREATE:
            yield group
            group, partitions = [], 0
        group.append(topic)
        partitions += topic.partitions
    if group:
        yield group


class TopicAdmin:
    """Batched admin operations on topics through one AdminClient; `close` when done. `name`
    names its waiting threads (`rillet-kafka-<name>`), to tell the lanes apart in a dump."""

    def __init__(
        self, client_config: Mapping[str, Any], *, timeout: float = 15.0, name: str = "topics"
    ) -> None:
        # The librdkafka logger is silenced: its connection errors would repeat every second
        # while Kafka is down, and the operator reports that state in statuses instead. Its
        # error callback keeps the last error that says why (a refused login, a certificate).
        config: dict[str, Any] = {
            **client_config,
            "log_level": 3,
            # Admin requests go to the broker the last metadata named controller; when that
            # broker dies they wait for it until the next refresh (5 min by default), and every
            # Topic would read KafkaUnavailable meanwhile. Refreshed often, the client moves on
            # to a live broker within seconds.
            "topic.metadata.refresh.interval.ms": 5000,
        }
        config["error_cb"] = self._on_client_error
        self._client = AdminClient(config)
        self._timeout = timeout
        self._why_unreachable: KafkaError | None = None
        self._refusals = 0  # how many refused logins the callback has seen
        self._waiting = concurrent.futures.ThreadPoolExecutor(
            max_workers=WAITING_THREADS, thread_name_prefix=f"rillet-kafka-{name}"
        )
        self._closed = False

    def close(self) -> None:
        """End the waits for Kafka (within _REFUSAL_CHECK_SECONDS) and their threads. Its
        connections close when the client is freed: confluent-kafka's has no close()."""
        self._closed = True
        self._waiting.shutdown(wait=False, cancel_futures=True)

    def _on_client_error(self, error: KafkaError) -> None:
        if error.code() in EXPLAINING:
            self._why_unreachable = error
        if error.code() in REFUSING:
            self._refusals += 1

    def _refused_since(self, seen: int) -> Callable[[], bool]:
        """Whether the client reported a refused login after `seen` of them (polled here: the
        callback runs only from poll)."""

        def refused() -> bool:
            if self._closed:  # nobody waits for the answer any more
                return True
            self._client.poll(0)
            return self._refusals > seen

        return refused

    async def _send(
        self,
        call: Callable[[list[T]], Mapping[K, concurrent.futures.Future[Any]]],
        items: Sequence[T],
        key: Callable[[T], K],
    ) -> dict[K, Any]:
        """Each item's result: Kafka's answer, its exception, or the client's KafkaFailure."""
        self._client.poll(0)  # what was reported before this request is not about it
        login_refused = self._refused_since(self._refusals)
        futures, refused = topicrequests.submit(call, items, key)
        try:
            try:
                settled = await _settle(futures, login_refused, self._waiting) if futures else {}
            except KafkaUnavailableError as error:
                if not error.lost_broker:
                    raise
                # A broker died mid-request or was the controller the client waited for (a lost
                # node of three): by now metadata names a live one, the second send reaches
                # it, and the topics never read as unavailable. Once only: a cluster that is
                # down fails every request again, and then it is unavailable.
                futures, refused = topicrequests.submit(call, items, key)
                settled = await _settle(futures, login_refused, self._waiting) if futures else {}
        except KafkaUnavailableError as error:
            raise KafkaUnavailableError(self._explained(str(error))) from None
        finally:
            self._client.poll(0)  # serves the error callback, so no reason goes stale
        self._why_unreachable = None
        return settled | refused

    def _explained(self, message: str) -> str:
        """`message` led by the client's reason when it had one: a request only times out."""
        self._client.poll(0)
        why = self._why_unreachable
        if why is None:
            return message
        return f"{EXPLAINING[why.code()]} ({why.str()}); {message}"

    async def describe(
        self, names: Iterable[str]
    ) -> dict[str, ObservedTopic | KafkaFailure | None]:
        """Each topic as Kafka has it, None if it does not exist."""
        names = sorted(set(names))
        if not names:
            return {}
        descriptions = await self._send(
            lambda batch: self._client.describe_topics(
                TopicCollection(batch), request_timeout=self._timeout
            ),
            names,
            key=lambda name: name,
        )
        existing = [
            n for n in names if not isinstance(descriptions[n], BaseException | KafkaFailure)
        ]
        overrides = await self._overrides(existing)
        observed: dict[str, ObservedTopic | KafkaFailure | None] = {}
        for name in names:
            description = descriptions[name]
            if isinstance(description, KafkaFailure):
                observed[name] = description
            elif isinstance(description, BaseException):
                gone = is_gone(description)
                observed[name] = None if gone else topicrequests.failure_of(description)
            elif isinstance(overrides.get(name), KafkaFailure):
                observed[name] = overrides[name]  # type: ignore[assignment]
            else:
                observed[name] = ObservedTopic(
                    name=name,
                    topic_id=str(description.topic_id),
                    partitions=len(description.partitions),
                    replication_factor=max(len(p.replicas) for p in description.partitions),
                    overrides=overrides[name],  # type: ignore[arg-type]
                )
        return observed

    async def _overrides(self, names: Sequence[str]) -> dict[str, dict[str, str] | KafkaFailure]:
        """The dynamic topic configs (overrides) of each topic: never broker defaults."""
        if not names:
            return {}
        resources = {ConfigResource(ResourceType.TOPIC, name): name for name in names}
        settled = await self._send(
            lambda batch: self._client.describe_configs(batch, request_timeout=self._timeout),
            list(resources),
            key=lambda resource: resource,
        )
        result: dict[str, dict[str, str] | KafkaFailure] = {}
        for resource, entries in settled.items():
            name = resources[resource]
            if isinstance(entries, KafkaFailure):
                result[name] = entries
                continue
            if isinstance(entries, BaseException):
                result[name] = topicrequests.failure_of(entries)
                continue
            result[name] = {
                key: entry.value
                for key, entry in entries.items()
                if entry.source == _DYNAMIC_TOPIC_CONFIG and entry.value is not None
            }
        return result

    async def create(self, topics: Sequence[DesiredTopic]) -> dict[str, KafkaFailure | None]:
        """Create topics (several requests when over Kafka's partition limit)."""
        results: dict[str, KafkaFailure | None] = {}
        built: dict[str, NewTopic] = {}
        for topic in topics:
            made = topicrequests.new_topic(topic)
            if isinstance(made, KafkaFailure):
                results[topic.name] = made
            else:
                built[topic.name] = made
        for group in split_creates([t for t in topics if t.name in built]):
            settled = await self._send(
                lambda batch: self._client.create_topics(
                    batch, operation_timeout=self._timeout, request_timeout=self._timeout
                ),
                [built[t.name] for t in group],
                key=lambda made: str(made.topic),
            )
            # Another lane (or operator) may have created it a moment ago: that is success.
            results |= {
                name: None if already_exists(value) else _outcome(value)
                for name, value in settled.items()
            }
        return results

    async def grow(self, partitions: Mapping[str, int]) -> dict[str, KafkaFailure | None]:
        """Raise partition counts to the given totals."""
        results: dict[str, KafkaFailure | None] = {}
        built: list[NewPartitions] = []
        for name, total in partitions.items():
            made = topicrequests.new_partitions(name, total)
            if isinstance(made, KafkaFailure):
                results[name] = made
            else:
                built.append(made)
        settled = await self._send(
            lambda batch: self._client.create_partitions(
                batch, operation_timeout=self._timeout, request_timeout=self._timeout
            ),
            built,
            key=lambda made: str(made.topic),
        )
        return results | {name: _outcome(value) for name, value in settled.items()}

    async def alter_configs(
        self, diffs: Mapping[str, ConfigDiff]
    ) -> dict[str, KafkaFailure | None]:
        """Incremental alter: SET changed keys, DELETE overrides no longer declared."""
        results: dict[str, KafkaFailure | None] = {}
        resources: dict[ConfigResource, str] = {}
        for name, diff in diffs.items():
            made = topicrequests.config_resource(name, diff)
            if isinstance(made, KafkaFailure):
                results[name] = made
            else:
                resources[made] = name
        settled = await self._send(
            lambda batch: self._client.incremental_alter_configs(
                batch, request_timeout=self._timeout
            ),
            list(resources),
            key=lambda resource: resource,
        )
        return results | {
            resources[resource]: _outcome(value) for resource, value in settled.items()
        }

    async def delete(self, names: Sequence[str]) -> dict[str, KafkaFailure | None]:
        """Delete topics; one already gone counts as deleted."""
        settled = await self._send(
            lambda batch: self._client.delete_topics(
                batch, operation_timeout=self._timeout, request_timeout=self._timeout
            ),
            list(names),
            key=lambda name: name,
        )
        return {
            name: None if isinstance(value, BaseException) and is_gone(value) else _outcome(value)
            for name, value in settled.items()
        }


def _outcome(value: object) -> KafkaFailure | None:
    """A settled item's failure (Kafka's or the client's), or None for a success."""
    if isinstance(value, KafkaFailure):
        return value
    return topicrequests.failure_of(value) if isinstance(value, BaseException) else None
