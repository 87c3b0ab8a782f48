"""Fixtures of Kafka beside the stack's broker: clusters of a test's own (a secured one among
them, which the node's pods reach), and the stack's schema registry with the subjects of a
test's own (deleted after it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from rillet.driverapi import runspecs
from rillet_devstack import pki, processes, provisioning
from rillet_devstack import stack as devstack
from rillet_devstack.kafka import KafkaCluster, secure
from rillet_devstack.schemaregistry import SchemaRegistryState


@contextlib.contextmanager
def separate_kafka(root: Path, *, brokers: int = 1) -> Iterator[str]:
    """A KRaft cluster of its own, beside the stack's (which keeps its single broker and its
    state); its bootstrap servers, and it is stopped afterwards."""
    cluster = KafkaCluster(
        libs=provisioning.KAFKA.directory / "libs", root=root, brokers=brokers, heap="384m"
    )
    _, bootstrap = cluster.start()
    try:
        yield bootstrap
    finally:
        cluster.kill_all()


@pytest.fixture
def node_secured_kafka(stack: devstack.StackState, tmp_path: Path) -> Iterator[KafkaCluster]:
    """A SASL_SSL broker with ACLs enforced, on the address pods reach; stopped afterwards."""
    address = stack.kafka_bootstrap.split(",")[0].rsplit(":", 1)[0]
    cluster = KafkaCluster(
        libs=provisioning.KAFKA.directory / "libs",
        root=tmp_path / "kafka",
        heap="384m",
        host=address,
        security=secure(pki.ensure(tmp_path / "pki"), host=address),
    )
    records, _ = cluster.start()
    try:
        yield cluster
    finally:
        for record in records:
            processes.stop(record)


@pytest.fixture(scope="session")
def schema_registry(stack: devstack.StackState) -> SchemaRegistryState:
    if stack.schema_registry is None:
        pytest.fail(
            "the stack runs without its schema registry: `rillet dev up --schema-registry`",
            pytrace=False,
        )
    return stack.schema_registry


@pytest.fixture
def subject_topic(
    kafka_prefix: str, schema_registry: SchemaRegistryState
) -> Iterator[tuple[str, SchemaRegistryClient]]:
    """A topic name of the test's own (no topic is made: serializers need none) and a client;
    the topic's subjects are deleted afterwards, for good."""
    topic = f"{kafka_prefix}-orders"
    with SchemaRegistryClient(schema_registry.client_config()) as client:
        yield topic, client
        for subject in client.get_subjects():
            if subject.startswith(topic):
                client.delete_subject(subject)
                client.delete_subject(subject, permanent=True)


@pytest.fixture
def registry(
    stack: devstack.StackState, monkeypatch: pytest.MonkeyPatch, kafka_prefix: str
) -> Iterator[tuple[runspecs.SchemaRegistry, SchemaRegistryClient]]:
    """The stack's registry as a run spec names it (its credentials in the environment, as
    `rillet run` reads them), and a client; the test's subjects (those of its topics, under
    its prefix) are deleted afterwards. Not every subject that appeared meanwhile: a test in
    another worker may still be using its own."""
    state: SchemaRegistryState | None = stack.schema_registry
    if state is None:
        pytest.fail("the stack runs without its schema registry", pytrace=False)
    for name, value in state.environment().items():
        monkeypatch.setenv(name, value)
    with SchemaRegistryClient(state.client_config()) as client:
        yield runspecs.SchemaRegistry(url=state.url), client
        # The prefix is the test's own: no subject under it existed before the test.
        for subject in client.get_subjects():
            if not subject.startswith(kafka_prefix):
                continue
            client.delete_subject(subject)
            client.delete_subject(subject, permanent=True)
