"""The stack's schema registry (`rillet dev up --schema-registry`), as a Confluent client sees it.

Test plan (ground truth: confluent-kafka's own registry client and Avro serializers, and raw
HTTP; a subject of the test's own, deleted afterwards):
- a value serialized by AvroSerializer is framed in the Confluent wire format (magic byte 0,
  the schema id) and read back equal by AvroDeserializer, nested record, array, null, decimal
  and timestamp included; its schema is version 1 of `<topic>-value`;
- the compatibility rule is Confluent's default, BACKWARD: a version adding a field without a
  default is refused (HTTP 409, naming the field), one adding it with a default is version 2,
  and a record written under version 1 reads under version 2 with the default;
- only the stack's user gets in: no credentials and a wrong password are refused (401); the
  user and password are those of Secret rillet-schema-registry (namespace default) and of
  `rillet dev env`, with the same URL; the password is not on the registry's command line.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from rillet_devstack import schemaregistering, schemaregistry
from rillet_devstack import stack as devstack
from rillet_devstack.schemaregistry import SchemaRegistryState

from . import nodes
from .avroorders import ORDER, ORDER_V1, with_field
from .conftest import Kube
from .objects import get


def test_avro_values_round_trip_and_evolve_under_backward_compatibility(
    subject_topic: tuple[str, SchemaRegistryClient],
) -> None:
    topic, client = subject_topic
    value = SerializationContext(topic, MessageField.VALUE)
    written = AvroSerializer(client, json.dumps(ORDER_V1))(ORDER, value)
    assert written is not None
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.version == 1
    assert written[:1] == b"\x00"  # the magic byte, then the schema's id
    assert int.from_bytes(written[1:5], "big") == latest.schema_id
    assert AvroDeserializer(client)(written, value) == ORDER

    without_default = with_field(ORDER_V1, {"name": "channel", "type": "string"})
    with pytest.raises(SchemaRegistryError) as refused:
        AvroSerializer(client, without_default)({**ORDER, "channel": "web"}, value)
    assert refused.value.http_status_code == 409, refused.value
    assert "channel" in str(refused.value)

    with_default = with_field(ORDER_V1, {"name": "channel", "type": "string", "default": "web"})
    AvroSerializer(client, with_default)({**ORDER, "channel": "app"}, value)
    assert client.get_versions(f"{topic}-value") == [1, 2]  # (the client caches the latest)
    read_as_v2 = AvroDeserializer(client, with_default)(written, value)
    assert read_as_v2 == {**ORDER, "channel": "web"}


def test_only_the_stacks_user_gets_in_with_the_secrets_credentials(
    kube: Kube, schema_registry: SchemaRegistryState, stack: devstack.StackState
) -> None:
    secret = get(kube, "secret", schemaregistry.SECRET_NAME, schemaregistry.SECRET_NAMESPACE)
    data = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
    subjects = f"{data['url']}/subjects"

    assert httpx.get(subjects, auth=(data["username"], data["password"])).status_code == 200
    assert httpx.get(subjects).status_code == 401
    assert httpx.get(subjects, auth=(data["username"], "wrong")).status_code == 401

    printed = dict(
        line.removeprefix("export ").split("=", 1)
        for line in nodes.rillet("dev", "env", timeout=60).stdout.splitlines()
        if line.startswith("export RILLET_SCHEMA_REGISTRY_")
    )
    assert printed == {
        "RILLET_SCHEMA_REGISTRY_URL": data["url"],
        "RILLET_SCHEMA_REGISTRY_USERNAME": data["username"],
        "RILLET_SCHEMA_REGISTRY_PASSWORD": data["password"],
    }

    (record,) = [p for p in stack.processes if p.name == schemaregistering.PROCESS_NAME]
    command_line = Path(f"/proc/{record.pid}/cmdline").read_bytes()
    assert data["password"].encode() not in command_line
