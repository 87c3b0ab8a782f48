"""The only code that calls Kafka's admin API: batched describe, create, grow, alter, delete.

Every call takes many topics and returns a result per topic: a per-topic failure is a value
(`KafkaFailure`), not an exception, so one bad topic never hides the others' results. Only a
cluster that cannot be reached at all raises `KafkaUnavailableError`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from rillet.reconcile.topicconfigs import ConfigDiff
from rillet.reconcile.topics import DesiredTopic, ObservedTopic

# Kafka refuses a CreateTopics request of more than 10,000 partitions in all.
MAX_PARTITIONS_PER_CREATE = 10_000

_UNREACHABLE = {
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NETWORK_EXCEPTION,
}
_DYNAMIC_TOPIC_CONFIG = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
_GONE = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_TOPIC_ID}

K = TypeVar("K")


class KafkaUnavailableError(RuntimeError):
    """No broker answered: nothing can be said about any topic."""


@dataclass(frozen=True)
class KafkaFailure:
    """Kafka refused one operation on one topic."""

    code: str  # Kafka's error name, e.g. INVALID_REPLICATION_FACTOR
    message: str

    @property
    def reason(self) -> str:
        """The error name in CamelCase, for a condition reason."""
        return "".join(part.capitalize() for part in self.code.strip("_").split("_"))


def _failure(error: BaseException) -> KafkaFailure:
    if isinstance(error, KafkaException) and isinstance(error.args[0], KafkaError):
        kafka_error: KafkaError = error.args[0]
        return KafkaFailure(code=kafka_error.name(), message=kafka_error.str())
    return KafkaFailure(code="UNKNOWN", message=str(error))


def _unreachable(error: BaseException) -> bool:
    return (
        isinstance(error, KafkaException)
        and isinstance(error.args[0], KafkaError)
        and error.args[0].code() in _UNREACHABLE
    )


def _already_exists(error: object) -> bool:
    return (
        isinstance(error, KafkaException)
        and isinstance(error.args[0], KafkaError)
        and error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    )


def _gone(error: BaseException) -> bool:
    return (
        isinstance(error, KafkaException)
        and isinstance(error.args[0], KafkaError)
        and error.args[0].code() in _GONE
    )


async def _settle(futures: Mapping[K, concurrent.futures.Future[Any]]) -> dict[K, Any]:
    """Each future's result or exception; raise KafkaUnavailableError if all failed unreachable."""
    # One worker thread waits for the whole batch: wrapping each future into the event loop
    # costs a loop wake-up per topic, more CPU than the describe itself for a 1,000-topic resync.
    await asyncio.to_thread(concurrent.futures.wait, list(futures.values()))
    settled = {key: future.exception() or future.result() for key, future in futures.items()}
    errors = [r for r in settled.values() if isinstance(r, BaseException)]
    if errors and len(errors) == len(settled) and all(_unreachable(e) for e in errors):
        raise KafkaUnavailableError(_failure(errors[0]).message)
    return settled


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
    """Batched admin operations on topics through one AdminClient."""

    def __init__(self, client_config: Mapping[str, Any], *, timeout: float = 15.0) -> None:
        # The librdkafka logger is silenced: its connection errors would repeat every second
        # while Kafka is down, and the operator reports that state in statuses instead.
        self._client = AdminClient({**client_config, "log_level": 3})
        self._timeout = timeout

    async def describe(
        self, names: Iterable[str]
    ) -> dict[str, ObservedTopic | KafkaFailure | None]:
        """Each topic as Kafka has it, None if it does not exist."""
        names = sorted(set(names))
        if not names:
            return {}
        descriptions = await _settle(
            self._client.describe_topics(TopicCollection(names), request_timeout=self._timeout)
        )
        existing = [n for n in names if not isinstance(descriptions[n], BaseException)]
        overrides = await self._overrides(existing)
        observed: dict[str, ObservedTopic | KafkaFailure | None] = {}
        for name in names:
            description = descriptions[name]
            if isinstance(description, BaseException):
                observed[name] = None if _gone(description) else _failure(description)
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
        settled = await _settle(
            self._client.describe_configs(list(resources), request_timeout=self._timeout)
        )
        result: dict[str, dict[str, str] | KafkaFailure] = {}
        for resource, entries in settled.items():
            name = resources[resource]
            if isinstance(entries, BaseException):
                result[name] = _failure(entries)
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
        for group in split_creates(topics):
            new_topics = [
                NewTopic(
                    t.name,
                    num_partitions=t.partitions,
                    replication_factor=t.replication_factor or -1,
                    config=dict(t.config),
                )
                for t in group
            ]
            settled = await _settle(
                self._client.create_topics(
                    new_topics, operation_timeout=self._timeout, request_timeout=self._timeout
                )
            )
            # Another lane (or operator) may have created it a moment ago: that is success.
            results |= {
                name: None if _already_exists(value) else _outcome(value)
                for name, value in settled.items()
            }
        return results

    async def grow(self, partitions: Mapping[str, int]) -> dict[str, KafkaFailure | None]:
        """Raise partition counts to the given totals."""
        if not partitions:
            return {}
        settled = await _settle(
            self._client.create_partitions(
                [NewPartitions(name, total) for name, total in partitions.items()],
                operation_timeout=self._timeout,
                request_timeout=self._timeout,
            )
        )
        return {name: _outcome(value) for name, value in settled.items()}

    async def alter_configs(
        self, diffs: Mapping[str, ConfigDiff]
    ) -> dict[str, KafkaFailure | None]:
        """Incremental alter: SET changed keys, DELETE overrides no longer declared."""
        if not diffs:
            return {}
        resources = {
            ConfigResource(
                ResourceType.TOPIC,
                name,
                incremental_configs=[
                    ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
                    for key, value in diff.set.items()
                ]
                + [
                    ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)
                    for key in diff.delete
                ],
            ): name
            for name, diff in diffs.items()
        }
        settled = await _settle(
            self._client.incremental_alter_configs(list(resources), request_timeout=self._timeout)
        )
        return {resources[resource]: _outcome(value) for resource, value in settled.items()}

    async def delete(self, names: Sequence[str]) -> dict[str, KafkaFailure | None]:
        """Delete topics; one already gone counts as deleted."""
        if not names:
            return {}
        settled = await _settle(
            self._client.delete_topics(
                list(names), operation_timeout=self._timeout, request_timeout=self._timeout
            )
        )
        return {
            name: None if isinstance(value, BaseException) and _gone(value) else _outcome(value)
            for name, value in settled.items()
        }


def _outcome(value: object) -> KafkaFailure | None:
    return _failure(value) if isinstance(value, BaseException) else None
