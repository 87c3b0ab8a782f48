"""What a failed Kafka call is taken for: only Kafka's own error codes count; a refused client
ends the wait for its requests."""

from __future__ import annotations

import concurrent.futures

import pytest
from confluent_kafka import KafkaError, KafkaException

from rillet.kafka import admin, errors


def test_kafkas_error_is_read_by_its_code() -> None:
    refused = KafkaException(KafkaError(KafkaError._AUTHENTICATION))
    assert errors.error_code(refused) == KafkaError._AUTHENTICATION
    assert errors.is_unreachable(refused)
    assert not errors.is_unreachable(KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS)))


def test_a_message_or_another_exception_has_no_code_and_is_no_outage() -> None:
    # The client raises KafkaException with a message for errors it makes up itself; reading a
    # code off it used to fail with AttributeError.
    for error in (KafkaException("Failed to get metadata"), KafkaException(), ValueError("x")):
        assert errors.error_code(error) is None
        assert not errors.is_unreachable(error)


def test_a_request_stops_waiting_once_kafka_refused_the_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A wrong password leaves requests unanswered until their timeout: the wait ends as soon
    # as the client reports the refusal instead.
    monkeypatch.setattr(admin, "_REFUSAL_CHECK_SECONDS", 0.01)
    pending: concurrent.futures.Future[None] = concurrent.futures.Future()
    checks = iter([False, False, True])
    assert not admin._wait_unless_refused([pending], lambda: next(checks))
    assert next(checks, "used up") == "used up"


def test_answered_requests_are_waited_for_whatever_the_client_reported() -> None:
    answered: concurrent.futures.Future[None] = concurrent.futures.Future()
    answered.set_result(None)
    assert admin._wait_unless_refused([answered], lambda: True)
