"""One topic's part of a Kafka admin request: checked, then built, each on its own (pure).

The Kafka client (librdkafka under confluent-kafka) refuses a whole request over one topic: a
partition count past a C int raises OverflowError when its NewTopic is built, one past its own
limit a ValueError from create_topics() for every topic of the call. No request is sent here.

Test plan:
- a topic within the client's limits is built as declared (partitions, replication factor or
  the broker's default, config); so are new partitions and a config change;
- partitions below 1 or past the client's limit (100,000; a C int ends at 2**31 - 1), a
  replication factor past 10,000: that topic's failure (InvalidPartitions,
  InvalidReplicationFactor), found before building, so nothing raises;
- an exception while building is that topic's failure (InvalidRequest, naming the exception);
- a request the client refuses as a whole is sent again one item at a time: only the item it
  refuses fails, the others are sent;
- a failure of the client reads as the client's in the status message, not as Kafka's.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

import pytest
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

from rillet.kafka import syncing, topicrequests
from rillet.reconcile.topicconfigs import ConfigDiff
from rillet.reconcile.topics import DesiredTopic


def test_a_topic_within_the_limits_is_built_as_declared() -> None:
    topic = DesiredTopic("orders", 6, None, {"retention.ms": "1000"})

    built = topicrequests.new_topic(topic)

    assert isinstance(built, NewTopic)
    assert (built.topic, built.num_partitions, built.replication_factor) == ("orders", 6, -1)
    assert built.config == {"retention.ms": "1000"}
    assert isinstance(topicrequests.new_topic(DesiredTopic("t", 1, 3)), NewTopic)
    most = topicrequests.CLIENT_MAX_PARTITIONS
    assert isinstance(topicrequests.new_partitions("orders", most), NewPartitions)
    change = ConfigDiff(set={"retention.ms": "5"}, delete=("segment.ms",))
    assert isinstance(topicrequests.config_resource("orders", change), ConfigResource)


@pytest.mark.parametrize(
    "partitions", [0, -1, topicrequests.CLIENT_MAX_PARTITIONS + 1, 2**31 - 1, 2**31]
)
def test_partitions_the_client_cannot_send_are_the_topics_failure(partitions: int) -> None:
    failure = topicrequests.new_topic(DesiredTopic("orders", partitions, None))

    assert isinstance(failure, topicrequests.KafkaFailure)
    assert (failure.reason, failure.client) == ("InvalidPartitions", True)
    assert f"{partitions} partitions is outside what the Kafka client can ask for" in (
        failure.message
    )
    assert "set spec.partitions within it" in failure.message
    grown = topicrequests.new_partitions("orders", partitions)
    assert isinstance(grown, topicrequests.KafkaFailure)
    assert grown.reason == "InvalidPartitions"


@pytest.mark.parametrize("factor", [0, topicrequests.CLIENT_MAX_REPLICATION_FACTOR + 1, 32767])
def test_a_replication_factor_the_client_cannot_send_is_the_topics_failure(factor: int) -> None:
    failure = topicrequests.new_topic(DesiredTopic("orders", 3, factor))

    assert isinstance(failure, topicrequests.KafkaFailure)
    assert failure.reason == "InvalidReplicationFactor"
    assert "spec.replicationFactor" in failure.message


def test_an_exception_while_building_is_the_topics_failure() -> None:
    # What a NewTopic did with the partitions of the measured crash, unchecked.
    failure = topicrequests.build(lambda: NewTopic("orders", num_partitions=2**31))

    assert isinstance(failure, topicrequests.KafkaFailure)
    assert (failure.reason, failure.client) == ("InvalidRequest", True)
    assert failure.message.startswith("OverflowError: ")


def _done(value: str) -> concurrent.futures.Future[Any]:
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    future.set_result(value)
    return future


def test_a_request_refused_whole_is_sent_again_item_by_item() -> None:
    requests: list[list[str]] = []

    def create(batch: list[str]) -> dict[str, concurrent.futures.Future[Any]]:
        requests.append(batch)
        if "bad" in batch:
            raise ValueError("Invalid NewTopic(bad): num_partitions out of expected range")
        return {name: _done(f"{name} sent") for name in batch}

    futures, failures = topicrequests.submit(create, ["a", "bad", "b"], key=lambda name: name)

    assert {name: f.result() for name, f in futures.items()} == {"a": "a sent", "b": "b sent"}
    assert list(failures) == ["bad"]
    assert failures["bad"].reason == "InvalidRequest"
    assert "num_partitions out of expected range" in failures["bad"].message
    assert requests == [["a", "bad", "b"], ["a"], ["bad"], ["b"]]


def test_a_request_the_client_takes_is_sent_once() -> None:
    requests: list[list[str]] = []

    def create(batch: list[str]) -> dict[str, concurrent.futures.Future[Any]]:
        requests.append(batch)
        return {name: _done(name) for name in batch}

    futures, failures = topicrequests.submit(create, ["a", "b"], key=lambda name: name)

    assert (sorted(futures), failures, requests) == (["a", "b"], {}, [["a", "b"]])
    assert topicrequests.submit(create, [], key=lambda name: name) == ({}, {})


def test_the_clients_refusal_is_not_worded_as_kafkas() -> None:
    client = topicrequests.KafkaFailure("INVALID_PARTITIONS", "200000 partitions is...", True)
    broker = topicrequests.KafkaFailure("INVALID_CONFIG", "Invalid value 1 for segment.bytes")

    assert syncing.refusal("create", "orders", client).message == (
        "the Kafka client cannot create topic orders: 200000 partitions is..."
    )
    assert syncing.refusal("create", "orders", broker).message == (
        "Kafka refused to create topic orders: Invalid value 1 for segment.bytes"
    )
    assert syncing.refusal("create", "orders", broker).reason == "InvalidConfig"
