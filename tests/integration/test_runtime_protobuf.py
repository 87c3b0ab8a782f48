"""Protobuf Apps with the stack's schema registry: reading and writing the Confluent wire format.

Test plan (ground truth: confluent-kafka's own ProtobufSerializer, against the registry, and
ProtobufDeserializer, given the message class protoc makes of the schema the registry serves
(it cannot ask Apicurio itself: docs/formats.md); messages built by hand in tests/protoorders;
the App of examples/protobuf-orders.yaml runs in this process's Spark, as `rillet run` runs it):
- round trip, evolution, bad records, and a version registered while the App runs: records of
  schema v1 and v2 (v2 adds a field) are produced by ProtobufSerializer, with three bad records
  between them (a wrong magic byte, an unknown schema id, a truncated payload); the App
  (reader: the subject's latest version when it starts, v2) writes its Protobuf output, which
  ProtobufDeserializer reads back as the values produced (nested and repeated messages, a map,
  an enum, a oneof, a wrapper, a timestamp, Confluent decimals, an unsigned 64-bit integer, an
  unset field left out), v1 records with v2's field at its default; its keys are messages of
  the key column under <topic>-key; each bad record is in the dead-letter topic, untouched,
  with its kind and reason; then a v3 is registered and a record of it produced while the App
  runs: it is read too (the query asks the registry for its id). The output and the dead
  letters are written exactly once, so each record is there once although the batches with a
  schema id new to the App ran twice;
- a registry refusal: an output whose derived message breaks its subject's BACKWARD rule (a
  field's type changed) stops the driver before it starts any query, with
  SchemaRegistryRefusedError naming the subject and the registry's reason.
"""

from __future__ import annotations

import decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.common.protobuf import protobuf_to_decimal
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, json_format
from google.protobuf.message import Message

from rillet.driverapi import runspecs, terminations
from rillet.runtime.queries import protocompiling, protofiles, protoschemas
from tests import protoorders
from tests.protoorders import ORDER

from . import runtime_helpers as rt
from . import standbys
from .polling import wait_for

EXAMPLE = Path(__file__).parents[2] / "examples" / "protobuf-orders.yaml"
COLUMNS = "id, at, amount, tags, note, address, counts, status, card, voucher, big, lines, channel"
F = descriptor_pb2.FieldDescriptorProto


def order_class(version: int) -> type[Message]:
    """The order message of protoorders' v1 or v2, or v3 (v2 and an int32 priority)."""
    if version < 3:
        return protofiles.message_class(protoorders.order_files(version=version), ORDER)
    file = protoorders.order_file(version=2)
    file.message_type[0].field.add(name="priority", number=14, type=F.TYPE_INT32)
    return protofiles.message_class(protofiles.ProtoFiles.of([file]), ORDER)


def _serialize(client: SchemaRegistryClient, version: int, topic: str, **fields: Any) -> bytes:
    """An order of `version` (protoorders' order, with `fields` set), as ProtobufSerializer
    writes it, registering its schema under <topic>-value."""
    kind = order_class(version)
    order: Any = protoorders.built_order(kind)
    for name, value in fields.items():
        setattr(order, name, value)
    serialize = ProtobufSerializer(kind, client)
    written: bytes | None = serialize(order, SerializationContext(topic, MessageField.VALUE))
    assert written is not None
    return written


def _served_class(client: SchemaRegistryClient, subject: str) -> type[Message]:
    """The message of a subject's latest version, compiled from the text the registry serves."""
    schema = client.get_latest_version(subject).schema
    assert schema.schema_type == "PROTOBUF"
    files = protocompiling.compile_text(schema.schema_str or "", name="served.proto")
    (message,) = [m.name for m in files.main.message_type]
    return protofiles.message_class(files, f"{files.main.package}.{message}")


def _values(message: Message) -> dict[str, Any]:
    """A message's fields as JSON has them, decimals as Decimal."""
    found: dict[str, Any] = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    for name in ("amount", "big"):
        if name in message.DESCRIPTOR.fields_by_name and message.HasField(name):
            found[name] = protobuf_to_decimal(getattr(message, name))
    return found


# protoorders' order as the output holds it: every column a field of its own message.
WRITTEN: dict[str, Any] = {
    "id": "7",
    "at": "2026-01-02T03:04:05.678901Z",
    "amount": decimal.Decimal("12.34"),
    "tags": ["a", "b"],
    "note": "ring twice",
    "address": {"city": "Oslo"},
    "counts": {"x": 1, "y": 2},
    "status": "PAID",
    "voucher": "99",
    "big": decimal.Decimal(2**64 - 1),
    "lines": [{"sku": "s1", "qty": 2}, {"sku": "s2", "qty": 0}],
}


def test_protobuf_records_of_every_version_round_trip_and_bad_ones_are_dead_lettered(
    registry: tuple[runspecs.SchemaRegistry, SchemaRegistryClient],
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
) -> None:
    spec_registry, client = registry
    documents = rt.load_manifests(EXAMPLE)
    documents[-1]["spec"]["pipeline"]["sql"] = f"SELECT {COLUMNS} FROM orders"
    topics = rt.privatize(documents, kafka_prefix, partitions={"orders": 1, "orders-checked": 1})
    rt.create_topics(kafka_admin, [NewTopic(t, 1, 1) for t in topics.values()])
    orders, checked = topics["orders"], topics["orders-checked"]
    first = _serialize(client, 1, orders)
    second = _serialize(client, 1, orders, id=8, card="visa")
    third = _serialize(client, 2, orders, id=9, channel="app")
    bad = [b"\x01" + first[1:], b"\x00\x00\x0f\x42\x40" + first[5:], first[:10]]
    rt.produce(
        kafka_bootstrap,
        orders,
        [("a", first), ("b", second), ("w", bad[0]), ("u", bad[1]), ("t", bad[2]), ("c", third)],
    )
    spec = rt.build_spec(
        documents,
        bootstrap=kafka_bootstrap,
        checkpoint=tmp_path / "ck",
        available_now=False,
        schema_registry=spec_registry,
    )
    classes: dict[str, type[Message]] = {}

    def written(part: str = "value") -> list[dict[str, Any]]:
        entries = rt.read_topic(kafka_bootstrap, checked)
        if not entries:
            return []
        if part not in classes:  # registered when the App started
            classes[part] = _served_class(client, f"{checked}-{part}")
        read = ProtobufDeserializer(classes[part], None, None)
        return [_values(read(e.value if part == "value" else e.key, None)) for e in entries]

    with rt.driven(spec) as driver:
        wait_for(lambda: len(written()) == 3, timeout=180, what="the App's first three records")
        later = _serialize(client, 3, orders, id=10, channel="pos", priority=2)
        rt.produce(kafka_bootstrap, orders, [("d", later)])
        wait_for(
            lambda: len(written()) == 4, timeout=180, what="a record of a version new to the App"
        )
        assert driver.failure() is None

    # A standby of the App warms up on its plan, encoding Protobuf as the App does; writing
    # nothing.
    warmed = standbys.standby_warm_up(spec)
    assert any(m.startswith("warmed up in") for m in warmed), warmed
    by_card = {name: value for name, value in WRITTEN.items() if name != "voucher"}
    assert written() == [
        {**WRITTEN, "channel": ""},  # v1: v2's field at its default
        {**by_card, "id": "8", "card": "visa", "channel": ""},  # card unset the oneof's voucher
        {**WRITTEN, "id": "9", "channel": "app"},
        {**WRITTEN, "id": "10", "channel": "pos"},  # v3: read as the reader (v2) has it
    ]
    assert written("key") == [{"id": "7"}, {"id": "8"}, {"id": "9"}, {"id": "10"}]
    dead = {
        value: headers for value, headers in rt.headers_of(kafka_bootstrap, topics["orders-dlq"])
    }
    assert set(dead) == set(bad)  # untouched, each once
    assert {value: h["rillet.error.kind"] for value, h in dead.items()} == {
        bad[0]: "not-confluent-protobuf",
        bad[1]: "unknown-schema-id",
        bad[2]: "corrupt-protobuf",
    }
    assert dead[bad[1]]["rillet.error.reason"] == (
        "schema id 1000000 is not a Protobuf schema in the schema registry"
    )
    assert "does not decode with schema id" in dead[bad[2]]["rillet.error.reason"]


def test_a_message_the_registry_refuses_stops_the_driver_naming_the_subject(
    registry: tuple[runspecs.SchemaRegistry, SchemaRegistryClient],
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
) -> None:
    spec_registry, client = registry
    documents = rt.load_manifests(EXAMPLE)
    topics = rt.privatize(documents, kafka_prefix)
    rt.create_topics(kafka_admin, [NewTopic(t, 1, 1) for t in topics.values()])
    _serialize(client, 1, topics["orders"])  # the input's subject
    subject = f"{topics['orders-checked']}-value"
    # The message the output derives, with its first field (id: int64 there) a string.
    name = protoschemas.message_name(f"{topics['orders-checked']}_value")
    taken = f'syntax = "proto3";\npackage rillet;\nmessage {name} {{\n  string id = 1;\n}}\n'
    client.register_schema(subject, Schema(taken, "PROTOBUF"))
    spec = rt.build_spec(
        documents,
        bootstrap=kafka_bootstrap,
        checkpoint=tmp_path / "ck",
        schema_registry=spec_registry,
    )

    with pytest.raises(terminations.SchemaRegistryRefusedError) as refused:
        rt.run_app(spec)

    message = str(refused.value)
    assert f"the schema registry refused the schema for subject {subject} (HTTP 409)" in message
    assert client.get_versions(subject) == [1]  # nothing registered
