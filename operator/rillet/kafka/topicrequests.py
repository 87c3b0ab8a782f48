"""One topic's part of a Kafka admin request: checked, then built on its own; and what becomes
of a topic that Kafka, or the Kafka client, refuses (`KafkaFailure`, a value, never an
exception).

librdkafka, under confluent-kafka, checks a request as it is built and refuses it whole: a
partition count past a C int raises OverflowError as its NewTopic is built, one past its own
limits a ValueError from create_topics() for every topic of the call. So each topic's part is
checked first (`check_topic`, `check_partitions`), then built alone (`build`): what goes wrong
is that topic's failure. A request the client still refuses as a whole is sent again one topic
at a time (`submit`), so that only the topic it refuses fails. Nothing here does I/O: `submit`
calls what it is given.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from rillet.reconcile.topicconfigs import ConfigDiff
from rillet.reconcile.topics import DesiredTopic

# What librdkafka sends for one topic (RD_KAFKAP_PARTITIONS_MAX, RD_KAFKAP_BROKERS_MAX): it
# refuses a whole request over one count beyond these.
CLIENT_MAX_PARTITIONS = 100_000
CLIENT_MAX_REPLICATION_FACTOR = 10_000

K = TypeVar("K")
T = TypeVar("T")


@dataclass(frozen=True)
class KafkaFailure:
    """Kafka, or the Kafka client before sending anything, refused one operation on one topic."""

    code: str  # Kafka's error name, e.g. INVALID_REPLICATION_FACTOR
    message: str
    client: bool = False  # refused by the Kafka client, before anything reached Kafka

    @property
    def reason(self) -> str:
        """The error name in CamelCase, for a condition reason."""
        return "".join(part.capitalize() for part in self.code.strip("_").split("_"))


def failure_of(error: BaseException) -> KafkaFailure:
    """Kafka's error (or another exception) as a failure value."""
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        kafka_error: KafkaError = error.args[0]
        return KafkaFailure(code=kafka_error.name(), message=kafka_error.str())
    return KafkaFailure(code="UNKNOWN", message=str(error))


def _client_failure(error: Exception) -> KafkaFailure:
    """What the client raised while building or sending one topic's request."""
    if isinstance(error, KafkaException):
        return dataclasses.replace(failure_of(error), client=True)
    return KafkaFailure(
        code="INVALID_REQUEST", message=f"{type(error).__name__}: {error}", client=True
    )


def check_topic(topic: DesiredTopic) -> KafkaFailure | None:
    """What keeps the client from creating `topic` (None: nothing), checked before building."""
    failure = check_partitions(topic.partitions)
    rf = topic.replication_factor
    if failure is None and rf is not None and not 1 <= rf <= CLIENT_MAX_REPLICATION_FACTOR:
        failure = KafkaFailure(
            code="INVALID_REPLICATION_FACTOR",
            message=f"replication factor {rf} is outside what the Kafka client can ask for (1 "
            f"to {CLIENT_MAX_REPLICATION_FACTOR}): set spec.replicationFactor within it",
            client=True,
        )
    return failure


def check_partitions(total: int) -> KafkaFailure | None:
    """What keeps the client from asking for a topic of `total` partitions (None: nothing)."""
    if 1 <= total <= CLIENT_MAX_PARTITIONS:
        return None
    return KafkaFailure(
        code="INVALID_PARTITIONS",
        message=f"{total} partitions is outside what the Kafka client can ask for (1 to "
        f"{CLIENT_MAX_PARTITIONS}): set spec.partitions within it",
        client=True,
    )


def build(make: Callable[[], T]) -> T | KafkaFailure:
    """One topic's part of a request, or its failure if the client refuses to build it."""
    try:
        return make()
    except Exception as error:  # whatever the cause, it is this topic's alone
        return _client_failure(error)


def new_topic(topic: DesiredTopic) -> NewTopic | KafkaFailure:
    """A topic's part of a CreateTopics request, checked then built."""
    refused = check_topic(topic)
    if refused is not None:
        return refused
    return build(
        lambda: NewTopic(
            topic.name,
            num_partitions=topic.partitions,
            replication_factor=topic.replication_factor or -1,
            config=dict(topic.config),
        )
    )


def new_partitions(name: str, total: int) -> NewPartitions | KafkaFailure:
    """A topic's part of a CreatePartitions request, checked then built."""
    refused = check_partitions(total)
    return refused if refused is not None else build(lambda: NewPartitions(name, total))


def config_resource(name: str, diff: ConfigDiff) -> ConfigResource | KafkaFailure:
    """A topic's part of an IncrementalAlterConfigs request: SET changed keys, DELETE overrides
    no longer declared."""
    return build(
        lambda: ConfigResource(
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
        )
    )


def submit(
    call: Callable[[list[T]], Mapping[K, concurrent.futures.Future[Any]]],
    items: Sequence[T],
    key: Callable[[T], K],
) -> tuple[dict[K, concurrent.futures.Future[Any]], dict[K, KafkaFailure]]:
    """Send `items` in one request; if the client refuses it as a whole, send each item alone,
    so only the one it refuses fails. Returns the futures, and the failures by key."""
    if not items:
        return {}, {}
    try:
        return dict(call(list(items))), {}
    except Exception as error:  # the client's refusal of the request as a whole
        if len(items) == 1:
            return {}, {key(items[0]): _client_failure(error)}
    futures: dict[K, concurrent.futures.Future[Any]] = {}
    failures: dict[K, KafkaFailure] = {}
    for item in items:
        sent, refused = submit(call, [item], key)
        futures |= sent
        failures |= refused
    return futures, failures
