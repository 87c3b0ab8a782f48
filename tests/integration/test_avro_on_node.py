"""Registry-encoded Apps and Tables as users run them: the operator hands their pods the schema
registry.

Test plan (an operator of the test's own with the stack's registry in its settings, as the
chart's `schemaRegistry.url` and `existingSecret` set them; ground truth: the registry, read
with confluent-kafka's client):
- an App whose Avro output breaks its subject's compatibility rule (the subject holds an
  incompatible version, registered by AvroSerializer): the driver pod, logged in to the
  registry with the credentials the operator put in the App's Secret, is refused, and the App
  is Stalled (SchemaRegistryRefused) naming the subject, the registry's reason and what to
  fix; the subject still has its one version;
- the registry's password is in no pod spec, ConfigMap, App status or Event of the namespace;
- an avro Table, and a protobuf one, with serve: its server pod (for Protobuf, protoc compiles
  the `.proto` text the registry serves, on a read-only root filesystem), logged in to the
  registry with the credentials of the Secret the operator made for it (owned by the Table),
  answers `rillet table get` (through the apiserver, no Kafka given) with the value
  AvroSerializer wrote (a Protobuf order under its schema as text), as JSON; the password is
  in no pod spec, ConfigMap or Event.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from rillet.reconcile import tableservers
from rillet_devstack import stack as devstack
from rillet_devstack.operating import OperatorProcess
from tests import protoorders

from . import protoproducing
from .avroorders import ORDER, ORDER_JSON, ORDER_V1
from .conftest import Kube
from .objects import apply, get, table, wait_condition
from .polling import wait_for
from .servedtables import ready_replicas, server_settings, table_get
from .wordcounts import C1_ONLY, SMALL, stalled

TAKEN = {"type": "record", "name": "Other", "fields": [{"name": "id", "type": "string"}]}


def _objects(app: str, namespace: str, image: str, orders: str, out: str) -> list[dict[str, Any]]:
    topics = [
        {
            "apiVersion": "rillet.io/v1alpha1",
            "kind": "Topic",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"partitions": 1, "deletionPolicy": "Delete"},
        }
        for name in (orders, out)
    ]
    return [
        *topics,
        {
            "apiVersion": "rillet.io/v1alpha1",
            "kind": "App",
            "metadata": {"name": app, "namespace": namespace},
            "spec": {
                "image": image,
                "inputs": [{"name": "orders", "topicRef": {"name": orders}, "format": "avro"}],
                "pipeline": {"sql": "SELECT id, amount FROM orders"},
                "outputs": [{"topicRef": {"name": out}, "valueFormat": "avro"}],
                "scaling": {"minExecutors": 1, "maxExecutors": 1},
                "driver": SMALL,
                "executor": SMALL,
                "sparkConf": C1_ONLY,
            },
        },
    ]


def _everything_shown(kube: Kube, namespace: str) -> str:
    """The namespace's pods, ConfigMaps, Apps and Events as the apiserver returns them."""
    return "\n".join(
        kube.kubectl("get", kind, "-n", namespace, "-o", "json").stdout
        for kind in ("pods", "configmaps", "apps.rillet.io", "events")
    )


def test_a_registry_refusal_of_an_avro_output_stalls_the_app_naming_the_subject(
    kube: Kube,
    stack: devstack.StackState,
    kafka_prefix: str,
    runtime_image: str,
    lone_operator: Callable[..., OperatorProcess],
) -> None:
    registry = stack.schema_registry
    if registry is None:
        pytest.fail("the stack runs without its schema registry", pytrace=False)
    own = lone_operator(settings=registry.environment())
    own.start()
    namespace = own.namespace_pattern
    app, orders, out = f"{kafka_prefix}-avro", f"{kafka_prefix}-orders", f"{kafka_prefix}-out"
    subject = f"{out}-value"
    with SchemaRegistryClient(registry.client_config()) as client:
        for topic, schema, record in ((orders, ORDER_V1, ORDER), (out, TAKEN, {"id": "x"})):
            context = SerializationContext(topic, MessageField.VALUE)
            AvroSerializer(client, json.dumps(schema))(record, context)
        try:
            apply(kube, *_objects(app, namespace, runtime_image, orders, out))

            refused = wait_for(
                stalled(kube, app, namespace), timeout=300, interval=3, what="the App Stalled"
            )
            assert refused["reason"] == "SchemaRegistryRefused", refused
            assert f"subject {subject} (HTTP 409)" in refused["message"]
            assert "Incompatible" in refused["message"]  # the registry's own words
            assert "new fields need defaults" in refused["message"]
            assert client.get_versions(subject) == [1]
            assert registry.password not in _everything_shown(kube, namespace)
        finally:
            for subject_name in (f"{orders}-value", subject):
                client.delete_subject(subject_name)
                client.delete_subject(subject_name, permanent=True)


def _avro_value(client: SchemaRegistryClient, topic: str) -> bytes:
    value = AvroSerializer(client, json.dumps(ORDER_V1))(
        ORDER, SerializationContext(topic, MessageField.VALUE)
    )
    assert value is not None
    return bytes(value)


# What each format's server is given (as a serializer of the ecosystem writes it) and answers.
SERVED = {
    "avro": (_avro_value, ORDER_JSON),
    # Registered as text, which the server compiles with protoc on its read-only root filesystem.
    "protobuf": (protoproducing.text_serialized, protoorders.ORDER_JSON),
}


@pytest.mark.parametrize("value_format", SERVED)
def test_a_registry_tables_server_answers_json_logged_in_from_its_own_secret(
    value_format: str,
    kube: Kube,
    stack: devstack.StackState,
    kafka_bootstrap: str,
    kafka_prefix: str,
    operator_image: str,
    lone_operator: Callable[..., OperatorProcess],
) -> None:
    registry = stack.schema_registry
    if registry is None:
        pytest.fail("the stack runs without its schema registry", pytrace=False)
    own = lone_operator(settings={**registry.environment(), **server_settings(operator_image)})
    own.start()
    namespace = own.namespace_pattern
    name, topic = "orders-by-id", f"{kafka_prefix}-orders-by-id"
    serialize, answer = SERVED[value_format]
    with SchemaRegistryClient(registry.client_config()) as client:
        try:
            value = serialize(client, topic)
            producer = Producer({"bootstrap.servers": kafka_bootstrap})
            spec = {"topicName": topic, "partitions": 1, "valueFormat": value_format, "serve": {}}
            manifest = table(name, namespace, **spec)
            del manifest["spec"]["valueSchema"]  # json's
            apply(kube, manifest)
            wait_condition(kube, "table", name, namespace, timeout=90)
            producer.produce(topic, key=b"7", value=value)
            assert producer.flush(30) == 0
            server = tableservers.server_name(name)
            wait_for(
                lambda: ready_replicas(kube, server, namespace) == 1,
                timeout=180,
                interval=1,
                what="the server pod to be Ready",
            )

            found = table_get(kube, name, "7", namespace, None)  # only the server knows

            assert found.returncode == 0, found.stderr
            assert json.loads(found.stdout) == answer
            secret = get(kube, "secret", tableservers.registry_secret_name(name), namespace)
            assert secret["metadata"]["ownerReferences"][0]["name"] == name
            assert registry.password not in _everything_shown(kube, namespace)
        finally:
            client.delete_subject(f"{topic}-value")
            client.delete_subject(f"{topic}-value", permanent=True)
