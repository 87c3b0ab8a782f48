"""What a failed Kafka call is taken for: only Kafka's own error codes count."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from rillet.kafka import admin


def test_kafkas_error_is_read_by_its_code() -> None:
    refused = KafkaException(KafkaError(KafkaError._AUTHENTICATION))
    assert admin.error_code(refused) == KafkaError._AUTHENTICATION
    assert admin.is_unreachable(refused)
    assert not admin.is_unreachable(KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS)))


def test_a_message_or_another_exception_has_no_code_and_is_no_outage() -> None:
    # The client raises KafkaException with a message for errors it makes up itself; reading a
    # code off it used to fail with AttributeError.
    for error in (KafkaException("Failed to get metadata"), KafkaException(), ValueError("x")):
        assert admin.error_code(error) is None
        assert not admin.is_unreachable(error)
