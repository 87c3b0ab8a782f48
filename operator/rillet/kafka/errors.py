"""What a failed Kafka admin call is taken for: the classification of the client's errors.

Only Kafka's own error codes count (`error_code`): a cluster no broker of which answered
(`is_unreachable`, raised as `KafkaUnavailableError`), a broker lost mid-request
(`LOST_BROKER`: worth a second send), a refused login (`REFUSING`: no answer will come), the
client errors that say why no broker answers (`EXPLAINING`), and a topic already there or
already gone (`already_exists`, `is_gone`: a success for a create or a delete). `admin` and
`principals` classify their calls' failures here; `syncing`, `claimstore` and `handlers` catch
`KafkaUnavailableError`. Nothing here does I/O.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

_UNREACHABLE = {
    KafkaError._AUTHENTICATION,
    KafkaError._SSL,
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NETWORK_EXCEPTION,
}
# Client errors that say why no broker answers, where a request only times out; the phrase
# leads the reason, which statuses.unavailable_message reads to say what to check.
EXPLAINING = {
    KafkaError._AUTHENTICATION: "Kafka refused the operator's login",
    KafkaError._SSL: "TLS with the brokers failed",
}
# A dropped connection, or a request that timed out waiting for its broker: librdkafka sends
# admin requests to the controller of its last metadata and waits for that broker, which KRaft
# reports alive until it fences it (broker.session.timeout.ms, 9 s by default).
LOST_BROKER = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT}
# The client errors that end a request's wait before its timeout (`admin`). A refused login is
# the cluster's answer (SCRAM users live in its metadata); a failed TLS handshake may be one
# broker's certificate while the others answer, so it is left to the timeout.
REFUSING = {KafkaError._AUTHENTICATION}
_GONE = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_TOPIC_ID}


class KafkaUnavailableError(RuntimeError):
    """No broker answered: nothing can be said about any topic.

    `lost_broker`: every request was cut off by a dropped connection or timed out waiting for
    one broker, as when the broker answering (or the one the last metadata named controller)
    died; another broker may answer a second send.
    """

    def __init__(self, message: str, *, lost_broker: bool = False) -> None:
        super().__init__(message)
        self.lost_broker = lost_broker


def error_code(error: object) -> int | None:
    """The code of Kafka's error a call failed with; None for anything else (including a
    KafkaException that carries a message instead of a KafkaError)."""
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        return int(error.args[0].code())
    return None


def is_unreachable(error: BaseException) -> bool:
    """Whether a failed call means no broker answered (or the login was refused)."""
    return error_code(error) in _UNREACHABLE


def already_exists(error: object) -> bool:
    return error_code(error) == KafkaError.TOPIC_ALREADY_EXISTS


def is_gone(error: BaseException) -> bool:
    return error_code(error) in _GONE
