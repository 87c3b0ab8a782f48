"""An Avro Table's server (`rillet table serve --value-format=avro`) on real Kafka, with the
stack's schema registry.

Test plan (a compacted topic of one partition with string keys, written by a producer with
confluent-kafka's own AvroSerializer against the registry; the server runs as its own process,
its registry credentials as files, as in its pod):
- it answers each key's value as JSON, decoded with that value's own writer's schema (v1's order
  without v2's field, v2's with it), and a value of a schema id the registry has not with 500
  saying why;
- `rillet table get --server` prints what it answers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from rillet_devstack import stack as devstack

from . import tableserving
from .avroorders import ORDER, ORDER_JSON, ORDER_V1, with_field
from .polling import wait_for

CHANNEL = {"name": "channel", "type": "string", "default": "web"}


def test_an_avro_tables_server_answers_json_decoded_with_each_writers_schema(
    stack: devstack.StackState,
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
) -> None:
    registry = stack.schema_registry
    if registry is None:
        pytest.fail("the stack runs without its schema registry", pytrace=False)
    topic = f"{kafka_prefix}-avro-profiles"
    kafka_admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[
        topic
    ].result(timeout=60)
    # As in the server's pod: the credentials are files of a mounted Secret, not env values.
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "username").write_text(registry.username)
    (credentials / "password").write_text(registry.password)
    env = {"RILLET_SCHEMA_REGISTRY_URL": registry.url}
    context = SerializationContext(topic, MessageField.VALUE)
    with SchemaRegistryClient(registry.client_config()) as client:
        try:
            older = AvroSerializer(client, json.dumps(ORDER_V1))(ORDER, context)
            newer = AvroSerializer(client, with_field(ORDER_V1, CHANNEL))(
                {**ORDER, "id": 8, "channel": "app"}, context
            )
            assert older is not None
            assert newer is not None
            unknown = b"\x00\x00\x0f\x42\x40" + older[5:]  # schema id 1000000
            writer = tableserving.TrackedProducer(kafka_bootstrap, topic)
            for key, value in (("7", older), ("8", newer), ("9", unknown)):
                writer.send(key.encode(), value)
            writer.flush()

            with tableserving.serving(
                kafka_bootstrap,
                topic,
                tmp_path / "store",
                formats=("string", "avro"),
                env=env,
                options=[f"--registry-credentials-dir={credentials}"],
            ) as (url, _):
                wait_for(lambda: tableserving.ready(url), timeout=60, what="the server to catch up")

                assert tableserving.get(url, "7").json() == ORDER_JSON
                assert tableserving.get(url, "8").json() == {
                    **ORDER_JSON,
                    "id": 8,
                    "channel": "app",
                }
                bad = tableserving.get(url, "9")
                assert bad.status_code == 500
                assert "the value of key 9 does not decode" in bad.json()["error"]
                printed = tableserving.table_get(url, topic, "7", key_format="string")
                assert printed.returncode == 0, printed.stderr
                assert json.loads(printed.stdout) == ORDER_JSON
        finally:
            client.delete_subject(f"{topic}-value")
            client.delete_subject(f"{topic}-value", permanent=True)
