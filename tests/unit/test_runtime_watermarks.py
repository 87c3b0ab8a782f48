"""Reading a partition's watermarks while its leadership moves, without Kafka.

Test plan:
- "not leader for partition" and "leader not available" (a broker restarting, a topic created a
  moment ago) are asked again until the leader answers;
- any other error (here: authorization, or a message without a Kafka error) fails the read at
  once, as raised;
- a leader that never settles fails the read after the settle time, with the last error.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from rillet.tables import watermarks


class ScriptedConsumer:
    """Answers get_watermark_offsets with the scripted errors first, then with (low, high)."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)
        self.asked: list[TopicPartition] = []

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float, cached: bool
    ) -> tuple[int, int]:
        assert not cached, "a cached watermark may be stale"
        self.asked.append(partition)
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return 3, 17


def test_a_moving_leader_is_asked_again_until_it_answers() -> None:
    consumer = ScriptedConsumer(
        KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE
    )

    marks = watermarks.watermarks(consumer, "orders", 2, timeout=1)

    assert marks == (3, 17)
    assert [(p.topic, p.partition) for p in consumer.asked] == [("orders", 2)] * 3


def test_other_errors_fail_at_once() -> None:
    consumer = ScriptedConsumer(KafkaError.TOPIC_AUTHORIZATION_FAILED)

    with pytest.raises(KafkaException) as raised:
        watermarks.watermarks(consumer, "orders", 0, timeout=1)

    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert len(consumer.asked) == 1


def test_a_leader_that_never_settles_fails_after_the_settle_time() -> None:
    consumer = ScriptedConsumer(*[KafkaError.NOT_LEADER_FOR_PARTITION] * 1000)

    with pytest.raises(KafkaException) as raised:
        watermarks.watermarks(consumer, "orders", 0, timeout=1, settle_seconds=0.3)

    assert raised.value.args[0].code() == KafkaError.NOT_LEADER_FOR_PARTITION
    assert 1 < len(consumer.asked) < 1000


def test_an_error_without_a_kafka_error_is_not_taken_for_a_moving_leader() -> None:
    assert not watermarks.leadership_moving(KafkaException("Table topic t: not found"))
    assert not watermarks.leadership_moving(KafkaException())
    assert not watermarks.leadership_moving(TimeoutError())
    assert watermarks.leadership_moving(KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE)))
