"""Fixtures of each test's own names on the shared stack: its Kafka prefix and topic names, and
its namespaces, which are cleaned up after it (their Topics, Tables and Apps first, while an
operator still releases their finalizers); and a namespace that enforces Pod Security
`restricted`, for the pods of the node's own tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from kubernetes.client.exceptions import ApiException

from . import driverpolicy, isolation
from .kubeapi import Kube
from .polling import until

RILLET_PLURALS = ("topics", "tables", "apps")
RILLET_KINDS = ",".join(f"{plural}.rillet.io" for plural in RILLET_PLURALS)
# The labels of a namespace that enforces Pod Security `restricted`.
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}


@dataclass
class Owned:
    """The names one test makes on the shared stack: its Kafka prefix and its namespaces."""

    prefix: str
    namespaces: list[str] = field(default_factory=list)

    def owns_topic(self, name: str) -> bool:
        return name.startswith(self.prefix) or any(
            name.startswith(f"{namespace}.") for namespace in self.namespaces
        )


@pytest.fixture
def owned(kafka_admin: AdminClient) -> Iterator[Owned]:
    """The test's names; afterwards its Kafka topics (a Retain topic, one made by hand, one
    named <namespace>.<name>) are deleted, once its namespaces' objects are gone."""
    names = Owned(prefix=f"{isolation.PREFIX}{isolation.new_id()}")
    yield names
    left = [t for t in kafka_admin.list_topics(timeout=30).topics if names.owns_topic(t)]
    if left:
        for future in kafka_admin.delete_topics(left, operation_timeout=30).values():
            try:
                future.result(timeout=60)
            except KafkaException as error:  # already being deleted (by an operator): fine
                if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise
        gone = until(
            lambda: (
                not any(names.owns_topic(t) for t in kafka_admin.list_topics(timeout=30).topics)
            ),
            timeout=60,
            interval=0.5,
        )
        assert gone, f"Kafka topics of the test not deleted: {left}"


@pytest.fixture
def kafka_prefix(owned: Owned) -> str:
    """The start of every Kafka topic name of the test (`<prefix>.<name>` or `<prefix>-...`)."""
    return owned.prefix


# A name under the test's prefix, from a short one (`unique("clicks")`).
Unique = Callable[[str], str]


@pytest.fixture
def unique(kafka_prefix: str) -> Unique:
    """Object (and Kafka topic) names under the test's prefix."""
    return lambda name: f"{kafka_prefix}-{name}"


@pytest.fixture
def topic_name(owned: Owned) -> str:
    """A Kafka topic name no other test uses."""
    return f"{owned.prefix}.{isolation.new_id()}"


def _rillet_objects(kube: Kube, namespace: str) -> list[str]:
    """The namespace's Topics, Tables and Apps, named as kubectl names them (`topics.rillet.io/x`);
    none without Rillet's CRDs."""
    found = []
    for plural in RILLET_PLURALS:
        try:
            items = kube.api.list(plural, namespace)
        except ApiException as error:
            if error.status != 404:  # 404: the CRDs are not installed (a test's own)
                raise
            items = []
        found += [f"{plural}.rillet.io/{item['metadata']['name']}" for item in items]
    return found


def delete_rillet_objects(kube: Kube, namespace: str) -> str | None:
    """Delete the namespace's Topics, Tables and Apps, waiting for their finalizers; what went
    wrong (finalizers nobody released, removed here so the namespace can go), or None."""
    # One delete-collection call per kind: `kubectl delete --all` sends a request per object
    # and then waits for each in turn (44 s for a namespace of 200 Topics).
    for plural in RILLET_PLURALS:
        kube.api.delete(plural, namespace=namespace)
    if until(lambda: not _rillet_objects(kube, namespace), timeout=60, interval=0.2):
        return None
    stuck = _rillet_objects(kube, namespace)
    for name in stuck:
        kube.kubectl(
            "patch",
            name,
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"metadata": {"finalizers": null}}',
            check=False,
        )
    return f"{namespace}: {stuck} not deleted within 60 s"


@pytest.fixture
def new_namespace(
    request: pytest.FixtureRequest, kube: Kube, owned: Owned
) -> Iterator[Callable[..., str]]:
    """Makes fresh namespaces of the test; the session operator watches them if the test uses
    it (or `operated=True`). Afterwards their Rillet objects are deleted (a finalizer left
    unreleased fails the test) and then the namespaces, without waiting for them to go."""
    made: list[str] = []

    def make(*, operated: bool | None = None) -> str:
        if operated is None:
            operated = "operator" in request.fixturenames
        name = f"{isolation.OPERATED if operated else isolation.PREFIX}{isolation.new_id()}"
        kube.api.create_namespace(name, labels=driverpolicy.session_label())
        made.append(name)
        owned.namespaces.append(name)
        return name

    yield make
    problems = [problem for name in made if (problem := delete_rillet_objects(kube, name))]
    for name in made:
        kube.api.delete("namespace", name)
    if problems:
        pytest.fail("objects left with finalizers: " + "; ".join(problems))


@pytest.fixture
def namespace(new_namespace: Callable[..., str]) -> str:
    """A fresh namespace for the test, removed afterwards."""
    return new_namespace()


@pytest.fixture
def restricted_namespace(kube: Kube) -> Iterator[str]:
    """A fresh namespace that enforces Pod Security `restricted`."""
    name = f"r-{uuid.uuid4().hex[:10]}"
    kube.kubectl("create", "namespace", name)
    labels = [f"{key}={value}" for key, value in RESTRICTED.items()]
    kube.kubectl("label", "namespace", name, *labels)
    yield name
    kube.kubectl("delete", "namespace", name, "--wait=false", check=False)
