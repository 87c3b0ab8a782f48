"""A partition's low and high watermarks, asked again while its leadership moves.

A broker restarting, or a topic created a moment ago, answers a watermark query with "not leader
for partition" (or "leader not available", "unknown partition") until the cluster's metadata
settles, usually within a second. That is an answer to wait for, not a failure of the read: a
Table's restore, `rillet table get` and the checkpoint check all read watermarks and would
otherwise fail in the seconds after a broker restart.
"""

from __future__ import annotations

from typing import Final, Protocol

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

# The answers of a cluster whose partition leadership is moving or not yet known.
LEADERSHIP_MOVING: Final = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
)
# A group's coordinator loading its state, not known yet, or moved: Kafka's answer a moment later.
COORDINATOR_MOVING: Final = frozenset(
    {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
    }
)
SETTLE_SECONDS: Final = 30.0


class WatermarkSource(Protocol):
    """What is read here of a confluent_kafka Consumer."""

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float, cached: bool
    ) -> tuple[int, int]: ...


def error_code(error: BaseException) -> int | None:
    """The Kafka error code a call failed with; None for other errors, and for a KafkaException
    its raiser gave a message rather than a KafkaError."""
    cause = error.args[0] if isinstance(error, KafkaException) and error.args else None
    return cause.code() if isinstance(cause, KafkaError) else None


def leadership_moving(error: BaseException) -> bool:
    """Whether a Kafka call failed because a partition's leader is moving or not yet known."""
    return error_code(error) in LEADERSHIP_MOVING


def kafka_settling(error: BaseException) -> bool:
    """Whether a Kafka call failed because a group's coordinator or a partition's leader is
    loading or moving: the same call succeeds once it has settled."""
    return error_code(error) in COORDINATOR_MOVING | LEADERSHIP_MOVING


def watermarks(
    consumer: WatermarkSource,
    topic: str,
    partition: int,
    *,
    timeout: float,
    settle_seconds: float = SETTLE_SECONDS,
) -> tuple[int, int]:
    """(low, high) watermark of one partition, read from its leader (never a cached value)."""
    retrying = Retrying(
        retry=retry_if_exception(leadership_moving),
        stop=stop_after_delay(settle_seconds),
        wait=wait_exponential(multiplier=0.1, max=2),
        reraise=True,
    )
    low, high = retrying(
        consumer.get_watermark_offsets,
        TopicPartition(topic, partition),
        timeout=timeout,
        cached=False,
    )
    return int(low), int(high)
