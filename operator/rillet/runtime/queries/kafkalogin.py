"""The driver's Kafka login, and what it says when Kafka refuses the App's principal.

The run spec says how to log in (`KafkaLogin`: protocol, mechanism, a directory); the username,
password and CA are files of the App's Secret mounted there. They are read once at start into
the spec's in-memory `kafka_config` (librdkafka names, for the driver's own clients), which
`java_client_config` renames for Spark's Kafka source and sink. Nothing here logs them: Kafka's
Java clients print `sasl.jaas.config` and `ssl.truststore.certificates` as [hidden], and Spark
redacts options whose value names a password.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from rillet.driverapi import runspecs
from rillet.reconcile import kafkaaccess

# How the driver's termination message starts when Kafka refused its principal
# (reconcile.appstatus.KAFKA_ACCESS_DENIED_ERROR reads it).
ACCESS_DENIED: Final = "KafkaAccessDenied"

_LOGIN_MODULES: Final = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# How Kafka's Java client and librdkafka say that an ACL is missing.
_REFUSED: Final = re.compile(
    r"(Topic|Group|TransactionalId|Cluster)AuthorizationException|"
    r"(TOPIC|GROUP|TRANSACTIONAL_ID|CLUSTER)_AUTHORIZATION_FAILED|"
    r"(Topic|Group) authorization failed|"
    r"Not authorized to access (topics|group)"
)
_TOPICS: Final = re.compile(r"Not authorized to access topics: \[([^\]]*)\]")


def _read(directory: Path, key: str) -> str:
    try:
        return (directory / key).read_text(encoding="utf-8").strip()
    except OSError as error:
        raise ValueError(
            f"cannot read the App's Kafka credentials ({directory / key}: {error.strerror}): "
            f"the driver mounts them from Secret <app>-kafka"
        ) from None


def with_credentials(spec: runspecs.RunSpec) -> runspecs.RunSpec:
    """The spec with the login's credentials in its kafka_config; as it is without a login.

    Raises ValueError naming the file that cannot be read (never its content).
    """
    login = spec.kafka_login
    if login is None:
        return spec
    directory = Path(login.credentials_dir)
    config = {
        "security.protocol": login.security_protocol,
        "sasl.mechanism": login.sasl_mechanism,
        "sasl.username": _read(directory, kafkaaccess.USERNAME_KEY),
        "sasl.password": _read(directory, kafkaaccess.PASSWORD_KEY),
    }
    if login.ca:
        config["ssl.ca.pem"] = _read(directory, kafkaaccess.CA_KEY)
    return spec.model_copy(update={"kafka_config": {**spec.kafka_config, **config}})


def _quoted(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def java_client_config(config: Mapping[str, str]) -> dict[str, str]:
    """librdkafka client settings as Kafka's Java client names them (Spark's source and sink):
    a username and password become sasl.jaas.config, a CA the PEM truststore (inline, so the
    executors need no file of it)."""
    java = dict(config)
    username, password = java.pop("sasl.username", None), java.pop("sasl.password", None)
    if username is not None:
        module = _LOGIN_MODULES.get(java.get("sasl.mechanism", "PLAIN"), _LOGIN_MODULES["PLAIN"])
        java["sasl.jaas.config"] = (
            f"{module} required username={_quoted(username)} password={_quoted(password or '')};"
        )
    pem, location = java.pop("ssl.ca.pem", None), java.pop("ssl.ca.location", None)
    if pem is not None:
        java |= {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": pem}
    elif location is not None:
        java |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": location}
    return java


def is_refusal(error_text: str) -> bool:
    """Whether a failure is Kafka refusing the App's principal (an ACL it lacks)."""
    return _REFUSED.search(error_text) is not None


def refused_topics(spec: runspecs.RunSpec, *, timeout: float = 10.0) -> list[str]:
    """The App's topics Kafka does not let its principal see, asked of Kafka: Java's messages
    often say only "Authorization failed."."""
    topics = sorted(
        {i.topic for i in spec.inputs}
        | {o.topic for o in spec.outputs}
        | ({spec.dead_letter_topic} if spec.dead_letter_topic else set())
    )
    admin = AdminClient({**spec.kafka_config, "bootstrap.servers": spec.bootstrap_servers})
    refused = []
    for topic in topics:
        try:
            found = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        except KafkaException:
            continue  # unreachable: the failure's own text says more
        error = found.error if found is not None else None
        if error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            refused.append(topic)
    return refused


def access_denied(error_text: str, spec: runspecs.RunSpec, refused: list[str]) -> str:
    """The termination message of a failure that is Kafka refusing the App's principal
    (`refused`: the topics it may not see, as far as known)."""
    user = spec.kafka_config.get("sasl.username")
    who = f"principal {kafkaaccess.principal(user)}" if user else "the App's Kafka principal"
    named = _TOPICS.search(error_text)
    if refused:
        what = f"topics [{', '.join(refused)}] (TOPIC_AUTHORIZATION_FAILED)"
    elif named:
        what = f"topics [{named[1]}]"
    else:
        what = "a topic, group or transactional id it uses"
    return (
        f"{ACCESS_DENIED}: Kafka refused {who} access to {what}. Rillet grants an App the "
        "topics of its own Topics and Tables; an external topic (inputs[].external, "
        f"deadLetterTopic.topicName) needs an ACL from whoever manages it for {who}."
    )
