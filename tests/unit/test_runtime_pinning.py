"""Pinning a batch's lookups while Kafka settles, without Kafka.

Test plan:
- a group's coordinator loading, unknown or moved, and a partition's leader moving, are Kafka
  settling; an authorization error, or a message without a Kafka error, is not;
- a pin that meets Kafka settling asks again until it gets its offsets;
- any other error fails the pin at once, as raised.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from rillet.runtime.queries import pinning
from rillet.tables import watermarks


class ScriptedPins(pinning.LookupPins):
    """Pins whose one Kafka round (`_pin`) raises the scripted errors first, then answers."""

    def __init__(self, *errors: int) -> None:  # no AdminClient: nothing here talks to Kafka
        self.errors = list(errors)
        self.rounds = 0

    def _pin(self, query_id: str, batch_id: int) -> pinning.Pins:
        self.rounds += 1
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return {"prices": {0: 7}}


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
    ],
)
def test_a_coordinator_or_leader_moving_is_kafka_settling(code: int) -> None:
    assert watermarks.kafka_settling(KafkaException(KafkaError(code)))


@pytest.mark.parametrize(
    "error",
    [
        KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)),
        KafkaException("Table topic prices is not there to look up"),
        ValueError("not Kafka's"),
    ],
)
def test_other_errors_are_not_kafka_settling(error: BaseException) -> None:
    assert not watermarks.kafka_settling(error)


def test_a_pin_asks_again_while_the_coordinator_loads() -> None:
    pins = ScriptedPins(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR)

    assert pins.pin("query-1", 7) == {"prices": {0: 7}}
    assert pins.rounds == 3


def test_a_pin_fails_at_once_on_any_other_error() -> None:
    pins = ScriptedPins(KafkaError.GROUP_AUTHORIZATION_FAILED)

    with pytest.raises(KafkaException) as raised:
        pins.pin("query-1", 7)
    assert raised.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert pins.rounds == 1
