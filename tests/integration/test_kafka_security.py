"""Kafka with TLS, SCRAM and ACLs: the operator connects with the credentials and CA of its
settings (from Secrets, in the chart), and says so when Kafka refuses its login.

Test plan (a KRaft broker of the test's own on SASL_SSL: SCRAM-SHA-512, the StandardAuthorizer
with allow.everyone.if.no.acl.found=false, its certificate from a CA of the test's own):
- the operator with the admin's credentials and the CA: a Topic and a Table become Ready, and
  the admin reads both topics back from Kafka with their partitions and compaction;
- a SCRAM user with no ACL cannot create a topic: Kafka says TOPIC_AUTHORIZATION_FAILED (the
  authorizer is on, nothing is allowed by default);
- the operator with a wrong password: the Topic is KafkaUnavailable, its message names the
  failed authentication and the credentials to check, the operator keeps running, and neither
  password appears in its log or in the Topic's status and Events. It says so before a request
  could have timed out: refused, the operator stops waiting for Kafka's answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from rillet_devstack import pki, processes, provisioning
from rillet_devstack.kafka import KafkaCluster, secure
from rillet_devstack.operating import OperatorProcess

from .conftest import Kube
from .kafka_reads import kafka_overrides, kafka_partitions
from .objects import apply, condition, events, get, table, topic, wait_condition


@pytest.fixture
def secured_kafka(tmp_path: Path) -> Iterator[KafkaCluster]:
    """A single SASL_SSL broker with ACLs enforced, stopped afterwards."""
    authority = pki.ensure(tmp_path / "pki")
    cluster = KafkaCluster(
        libs=provisioning.KAFKA.directory / "libs",
        root=tmp_path / "kafka",
        heap="384m",
        security=secure(authority, host="127.0.0.1"),
    )
    records, _ = cluster.start()
    try:
        yield cluster
    finally:
        for record in records:
            processes.stop(record)


def _operator_settings(cluster: KafkaCluster, *, password: str | None = None) -> dict[str, str]:
    """What the chart sets from its values and Secrets, for this cluster (App principals off:
    these tests run no App)."""
    security = cluster.security
    assert security is not None
    settings = {**security.operator_environment(), "RILLET_KAFKA_BOOTSTRAP": cluster.bootstrap}
    settings["RILLET_APP_KAFKA_PRINCIPALS"] = "false"
    if password is not None:  # a login of its own wins over the credentials' files
        settings["RILLET_KAFKA_SASL_USERNAME"] = security.admin_user
        settings["RILLET_KAFKA_SASL_PASSWORD"] = password
    return settings


def test_the_operator_reconciles_on_sasl_ssl_and_the_authorizer_refuses_a_user_without_acls(
    kube: Kube,
    kafka_prefix: str,
    secured_kafka: KafkaCluster,
    lone_operator: Callable[..., OperatorProcess],
) -> None:
    own = lone_operator(settings=_operator_settings(secured_kafka))
    own.start()
    namespace = own.namespace_pattern
    name, changelog = f"{kafka_prefix}-secured", f"{kafka_prefix}-secured-table"
    apply(
        kube,
        topic(name, namespace, partitions=3, deletionPolicy="Delete"),
        table(changelog, namespace, partitions=2, deletionPolicy="Delete"),
    )
    wait_condition(kube, "topic", name, namespace, timeout=90)
    wait_condition(kube, "table", changelog, namespace, timeout=90)

    admin = AdminClient(secured_kafka.client_config())
    assert kafka_partitions(admin, name) == 3
    assert kafka_partitions(admin, changelog) == 2
    assert kafka_overrides(admin, changelog)["cleanup.policy"] == "compact"

    user, password = "no-acls", "no-acls-password"
    credential = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
    )
    for future in admin.alter_user_scram_credentials([credential]).values():
        future.result(timeout=30)
    security = secured_kafka.security
    assert security is not None
    stranger = AdminClient(
        {
            "bootstrap.servers": secured_kafka.bootstrap,
            **security.client_config(user=user, password=password),
        }
    )
    refused = stranger.create_topics([NewTopic(f"{kafka_prefix}-not-allowed", 1, 1)])
    with pytest.raises(KafkaException) as denied:
        next(iter(refused.values())).result(timeout=60)
    assert denied.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_wrong_password_is_kafka_unavailable_naming_authentication_and_never_shown(
    kube: Kube,
    kafka_prefix: str,
    secured_kafka: KafkaCluster,
    lone_operator: Callable[..., OperatorProcess],
) -> None:
    wrong = "wrong-password-4c1d"
    # Requests would time out after 120 s: the condition must come from the refusal itself.
    settings = _operator_settings(secured_kafka, password=wrong)
    settings["RILLET_KAFKA_REQUEST_TIMEOUT_SECONDS"] = "120"
    own = lone_operator(settings=settings)
    own.start()
    namespace = own.namespace_pattern
    name = f"{kafka_prefix}-refused-login"
    apply(kube, topic(name, namespace))

    unavailable = wait_condition(
        kube,
        "topic",
        name,
        namespace,
        condition_type="Reconciling",
        reason="KafkaUnavailable",
        timeout=60,
    )
    message = condition(unavailable, "Reconciling")["message"]
    assert "Kafka refused the operator's login (sasl_ssl://" in message, message
    assert "SASL authentication error" in message
    assert "Check the chart values kafka.credentialsSecret" in message
    assert own.process is not None
    assert own.process.poll() is None, "the operator keeps running"

    security = secured_kafka.security
    assert security is not None
    shown = [
        own.log.read_text(encoding="utf-8", errors="replace"),
        json.dumps(get(kube, "topic", name, namespace)),
        json.dumps(events(kube, namespace, name)),
    ]
    for password in (wrong, security.admin_password):
        assert not [text for text in shown if password in text], "a password was shown"
