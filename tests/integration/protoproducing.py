"""Protobuf orders as confluent-kafka's own ProtobufSerializer writes them (the ground truth of
the Protobuf Table tests, in process and on the node): tests/protoorders' order, its schema
registered under <topic>-value."""

from __future__ import annotations

from typing import Any

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf.message import Message

from rillet.runtime.queries import protofiles
from tests import protoorders


def order_class(version: int = 1) -> type[Message]:
    return protofiles.message_class(protoorders.order_files(version=version), protoorders.ORDER)


def serialized(
    client: SchemaRegistryClient,
    topic: str,
    *,
    version: int = 1,
    order_id: int = 7,
    city: str | None = None,
    note: str | None = None,
    channel: str | None = None,
) -> bytes:
    """protoorders' order (with what is given changed), as ProtobufSerializer writes it,
    registering its schema under <topic>-value."""
    kind = order_class(version)
    order: Any = protoorders.built_order(kind)
    order.id = order_id
    if city is not None:
        order.address.city = city
    if note is not None:
        order.note.value = note
    if channel is not None:
        order.channel = channel
    written = ProtobufSerializer(kind, client)(
        order, SerializationContext(topic, MessageField.VALUE)
    )
    assert written is not None
    return bytes(written)


def text_serialized(client: SchemaRegistryClient, topic: str) -> bytes:
    """protoorders' order under its schema registered as `.proto` text (as a Java producer or a
    Rillet App registers it; ProtobufSerializer registers a descriptor), in the wire format:
    magic byte, schema id, then the message indexes of the first message (a lone 0)."""
    schema_id: int = client.register_schema(
        f"{topic}-value", Schema(protoorders.ORDER_PROTO_V1, "PROTOBUF")
    )
    payload: bytes = protoorders.built_order(order_class(1)).SerializeToString()
    return b"\x00" + schema_id.to_bytes(4, "big") + b"\x00" + payload
