"""Protobuf Tables with the stack's schema registry: written by an App, looked up, joined,
printed as JSON by `rillet table get`, `--watch` and a Table server.

Test plan (ground truth: orders built by hand in tests/protoorders, produced by confluent-kafka's
own ProtobufSerializer against the registry; their JSON written out there as Protobuf's JSON
mapping gives it; the Apps run in this process's Spark, as `rillet run` runs them):
- an App writes a Protobuf Table (`valueFormat: protobuf`, its message derived from the
  columns, registered under <changelog>-value) from Protobuf orders, the last value per key
  kept; a second App looks the Table up from json questions and joins it: the answers hold
  each order's amount and city, NULL for an order the Table has not; `rillet table get`
  prints each key's value as JSON (64-bit integers and the decimal as text, the timestamp in
  RFC 3339); `--watch` prints the value, then a tombstone as `(deleted)`;
- a Table server (`rillet table serve --value-format=protobuf`, its registry credentials as
  files, as in its pod) answers each key's value decoded with its own writer's schema (v1's
  order without v2's field, v2's with it), a value of an id the registry has not with 500
  saying why, and `rillet table get --server` prints what it answers.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient

from rillet.driverapi import runspecs
from rillet_devstack import stack as devstack
from tests import protoorders

from . import runtime_helpers as rt
from . import tableserving, watching
from .polling import wait_for
from .protoproducing import serialized

API = {"apiVersion": "rillet.io/v1alpha1"}
# protoorders' order as the Table's derived message holds its columns.
TABLE_JSON = {
    name: protoorders.ORDER_JSON[name] for name in ("id", "amount", "at", "tags", "note", "address")
}


def _documents() -> list[dict[str, Any]]:
    """Orders (Protobuf) to a Protobuf Table by id; questions (json) that look it up and join
    it, to answers."""
    topics = [
        {**API, "kind": "Topic", "metadata": {"name": name}, "spec": {"partitions": 1}}
        for name in ("orders", "questions", "answers")
    ]
    table = {
        **API,
        "kind": "Table",
        "metadata": {"name": "orders-by-id"},
        "spec": {"partitions": 1, "valueFormat": "protobuf"},
    }
    writer = {
        **API,
        "kind": "App",
        "metadata": {"name": "check-orders"},
        "spec": {
            "image": "rillet/spark-runtime:0.1.0",
            "inputs": [
                {
                    "name": "orders",
                    "topicRef": {"name": "orders"},
                    "format": "protobuf",
                    "startingOffsets": "earliest",
                }
            ],
            "pipeline": {"sql": "SELECT id, amount, at, tags, note, address FROM orders"},
            "outputs": [{"tableRef": {"name": "orders-by-id"}, "keyColumns": ["id"]}],
        },
    }
    reader = {
        **API,
        "kind": "App",
        "metadata": {"name": "answer-orders"},
        "spec": {
            "image": "rillet/spark-runtime:0.1.0",
            "inputs": [
                {
                    "name": "questions",
                    "topicRef": {"name": "questions"},
                    "schema": "order STRING",
                    "startingOffsets": "earliest",
                    "lookups": [{"table": "known", "keyColumns": ["order"]}],
                },
                {"name": "known", "tableRef": {"name": "orders-by-id"}},
            ],
            "pipeline": {
                "sql": "SELECT q.order, q.known.amount AS looked_up, k.address.city AS city "
                "FROM questions q LEFT JOIN known k ON k.id = CAST(q.order AS BIGINT)"
            },
            "outputs": [{"topicRef": {"name": "answers"}, "keyColumns": ["order"]}],
        },
    }
    return [*topics, table, writer, reader]


def test_a_protobuf_table_is_looked_up_joined_and_printed_as_json(
    registry: tuple[runspecs.SchemaRegistry, SchemaRegistryClient],
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
) -> None:
    spec_registry, client = registry
    documents = _documents()
    topics = rt.privatize(documents, kafka_prefix)
    rt.create_topics(kafka_admin, [NewTopic(t, 1, 1) for t in topics.values()])
    orders = topics["orders"]
    rt.produce(
        kafka_bootstrap,
        orders,
        [
            ("a", serialized(client, orders, note="old")),
            ("b", serialized(client, orders, order_id=8, city="Bergen")),
            ("c", serialized(client, orders)),  # id 7 again: the Table keeps this one
        ],
    )
    rt.produce(kafka_bootstrap, topics["questions"], [(q, json.dumps({"order": q})) for q in "789"])
    build = functools.partial(
        rt.build_spec, documents, bootstrap=kafka_bootstrap, schema_registry=spec_registry
    )

    rt.run_app(build(app="check-orders", checkpoint=tmp_path / "writer"))
    reader = build(app="answer-orders", checkpoint=tmp_path / "reader", available_now=False)

    def answers() -> list[Any]:
        return rt.json_values(rt.read_topic(kafka_bootstrap, topics["answers"]))

    with rt.driven(reader) as driver:
        wait_for(lambda: len(answers()) == 3, timeout=180, what="the answers to three orders")
        assert driver.failure() is None

    assert sorted(answers(), key=lambda a: a["order"]) == [
        {"order": "7", "looked_up": 12.34, "city": "Oslo"},
        {"order": "8", "looked_up": 12.34, "city": "Bergen"},
        {"order": "9", "looked_up": None, "city": None},
    ]
    manifest = rt.write_manifests(documents, tmp_path / "manifests.yaml")
    get = functools.partial(
        rt.cli, "table", "get", "orders-by-id", "--file", str(manifest), "-b", kafka_bootstrap
    )
    got = get("8")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout) == {**TABLE_JSON, "id": "8", "address": {"city": "Bergen"}}
    seven = get("7")
    assert json.loads(seven.stdout) == TABLE_JSON
    watch = [sys.executable, "-m", "rillet.cli", "table", "get", "orders-by-id", "7", "-w"]
    with watching.watched(
        [*watch, "--file", str(manifest), "-b", kafka_bootstrap], env=rt.cli_env()
    ) as lines:
        key, value = next(lines).split("\t")
        assert (key, json.loads(value)) == ("7", TABLE_JSON)
        rt.produce(kafka_bootstrap, topics["orders-by-id"], [("7", None)])
        assert next(lines) == "7\t(deleted)"


def test_a_protobuf_tables_server_answers_json_decoded_with_each_writers_schema(
    stack: devstack.StackState,
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
) -> None:
    registry = stack.schema_registry
    if registry is None:
        pytest.fail("the stack runs without its schema registry", pytrace=False)
    topic = f"{kafka_prefix}-protobuf-profiles"
    kafka_admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[
        topic
    ].result(timeout=60)
    # As in the server's pod: the credentials are files of a mounted Secret, not env values.
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "username").write_text(registry.username)
    (credentials / "password").write_text(registry.password)
    env = {"RILLET_SCHEMA_REGISTRY_URL": registry.url}
    with SchemaRegistryClient(registry.client_config()) as client:
        try:
            older = serialized(client, topic)
            newer = serialized(client, topic, version=2, order_id=8, channel="app")
            unknown = b"\x00\x00\x0f\x42\x40" + older[5:]  # schema id 1000000
            writer = tableserving.TrackedProducer(kafka_bootstrap, topic)
            for key, value in (("7", older), ("8", newer), ("9", unknown)):
                writer.send(key.encode(), value)
            writer.flush()

            with tableserving.serving(
                kafka_bootstrap,
                topic,
                tmp_path / "store",
                formats=("string", "protobuf"),
                env=env,
                options=[f"--registry-credentials-dir={credentials}"],
            ) as (url, _):
                wait_for(lambda: tableserving.ready(url), timeout=60, what="the server to catch up")

                assert tableserving.get(url, "7").json() == protoorders.ORDER_JSON
                assert tableserving.get(url, "8").json() == {
                    **protoorders.ORDER_JSON,
                    "id": "8",
                    "channel": "app",
                }
                bad = tableserving.get(url, "9")
                assert bad.status_code == 500
                assert "the value of key 9 does not decode" in bad.json()["error"]
                assert "schema id 1000000 is not in the registry" in bad.json()["error"]
                printed = tableserving.table_get(url, topic, "7", key_format="string")
                assert printed.returncode == 0, printed.stderr
                assert json.loads(printed.stdout) == protoorders.ORDER_JSON
        finally:
            client.delete_subject(f"{topic}-value")
            client.delete_subject(f"{topic}-value", permanent=True)
