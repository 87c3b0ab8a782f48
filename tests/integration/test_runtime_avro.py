"""Avro Apps with the stack's schema registry: reading and writing the Confluent wire format.

Test plan (ground truth: confluent-kafka's own AvroSerializer and AvroDeserializer against the
registry; the App of examples/avro-orders.yaml runs in this process's Spark, as `rillet run`
runs it):
- round trip, evolution, bad records, and a version registered while the App runs: records of
  schema v1 and v2 (v2 adds a field with a default) are produced by AvroSerializer, with three
  bad records between them (a wrong magic byte, an unknown schema id, a truncated payload); the
  App (reader: the subject's latest version when it starts, v2) writes its Avro output, which
  AvroDeserializer reads back equal to what was produced (nested record, array, null, decimal
  and timestamp included), v1 records with v2's default, its keys Avro records of the key
  column; each bad record is in the dead-letter
  topic, untouched, with its kind and reason; then a v3 is registered and a record of it
  produced while the App runs: it is read too (the query asks the registry for its id). The
  output and the dead letters are written exactly once, so each record is there once although
  the batches with a schema id new to the App ran twice;
- a registry refusal: an output whose derived schema breaks its subject's BACKWARD rule stops
  the driver before it starts any query, with SchemaRegistryRefusedError naming the subject
  and the registry's reason;
- an Avro Table: the example's App writes its Avro Table (values under `<changelog>-value`); a
  second App looks it up and joins it from a json input, and answers with the orders' values
  (the latest per id); a value of a version registered while it runs (AvroSerializer, a field
  added) is read too, the query planned again with it; `rillet table get` prints values as JSON,
  each decoded with its own writer's schema, and `--watch` the value, then its deletion;
- a registry that goes away (a TCP gate in front of it drops every connection) while a record
  of a version new to the App arrives: the App asks again and again, writes nothing, sends
  nothing to the dead-letter topic and does not fail; once the registry is back, the record
  is written.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from rillet.driverapi import runspecs, terminations

from . import runtime_helpers as rt
from . import standbys, tcpgate, watching
from .avroorders import ORDER, ORDER_JSON, ORDER_V1, with_field
from .polling import wait_for

CHANNEL = {"name": "channel", "type": "string", "default": "web"}
PRIORITY = {"name": "priority", "type": "int", "default": 0}


EXAMPLE = Path(__file__).parents[2] / "examples" / "avro-orders.yaml"


def _documents() -> list[dict[str, Any]]:
    """An App writing the order ids and amounts of `orders` to `orders-checked` in Avro."""
    documents = rt.load_manifests(EXAMPLE)
    app = documents[-1]["spec"]
    app["pipeline"]["sql"] = "SELECT id, amount FROM orders"
    del app["deadLetterTopic"]
    return documents


def _serialize(
    client: SchemaRegistryClient, schema: str, record: dict[str, Any], topic: str
) -> bytes:
    written = AvroSerializer(client, schema)(
        record, SerializationContext(topic, MessageField.VALUE)
    )
    assert isinstance(written, bytes)
    return written


def test_avro_records_of_every_version_round_trip_and_bad_ones_are_dead_lettered(
    registry: tuple[runspecs.SchemaRegistry, SchemaRegistryClient],
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
) -> None:
    spec_registry, client = registry
    documents = rt.load_manifests(EXAMPLE)
    documents[-1]["spec"]["outputs"][0]["keyFormat"] = "avro"
    topics = rt.privatize(documents, kafka_prefix, partitions={"orders": 1, "orders-checked": 1})
    rt.create_topics(kafka_admin, [NewTopic(t, 1, 1) for t in topics.values()])
    orders = topics["orders"]
    v1, v2 = json.dumps(ORDER_V1), with_field(ORDER_V1, CHANNEL)
    first = _serialize(client, v1, ORDER, orders)
    second = _serialize(client, v1, {**ORDER, "id": 8, "note": "fragile"}, orders)
    third = _serialize(client, v2, {**ORDER, "id": 9, "channel": "app"}, orders)
    bad = [b"\x01" + first[1:], b"\x00\x00\x0f\x42\x40" + first[5:], first[:9]]
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
    read = AvroDeserializer(client)
    value = SerializationContext(topics["orders-checked"], MessageField.VALUE)
    key = SerializationContext(topics["orders-checked"], MessageField.KEY)

    def written() -> list[Any]:
        entries = rt.read_topic(kafka_bootstrap, topics["orders-checked"])
        return [read(entry.value, value) for entry in entries]

    with rt.driven(spec) as driver:
        wait_for(lambda: len(written()) == 3, timeout=180, what="the App's first three records")
        v3 = with_field(json.loads(v2), PRIORITY)
        later = _serialize(client, v3, {**ORDER, "id": 10, "channel": "pos", "priority": 2}, orders)
        rt.produce(kafka_bootstrap, orders, [("d", later)])
        wait_for(
            lambda: len(written()) == 4, timeout=180, what="a record of a version new to the App"
        )
        assert driver.failure() is None

    # A standby of the App warms up on its plan, encoding Avro as the App does; writing nothing.
    warmed = standbys.standby_warm_up(spec)
    assert any(m.startswith("warmed up in") for m in warmed), warmed
    assert written() == [
        {**ORDER, "channel": "web", "large": False},
        {**ORDER, "id": 8, "note": "fragile", "channel": "web", "large": False},
        {**ORDER, "id": 9, "channel": "app", "large": False},
        {**ORDER, "id": 10, "channel": "pos", "large": False},
    ]
    keys = [read(e.key, key) for e in rt.read_topic(kafka_bootstrap, topics["orders-checked"])]
    assert keys == [{"id": 7}, {"id": 8}, {"id": 9}, {"id": 10}]  # keyFormat avro, <topic>-key
    dead = {
        value: headers for value, headers in rt.headers_of(kafka_bootstrap, topics["orders-dlq"])
    }
    assert set(dead) == set(bad)  # untouched, each once
    assert {value: h["rillet.error.kind"] for value, h in dead.items()} == {
        bad[0]: "not-confluent-avro",
        bad[1]: "unknown-schema-id",
        bad[2]: "corrupt-avro",
    }
    assert dead[bad[1]]["rillet.error.reason"] == (
        "schema id 1000000 is not an Avro schema in the schema registry"
    )
    assert "does not decode with schema id" in dead[bad[2]]["rillet.error.reason"]


def test_a_schema_the_registry_refuses_stops_the_driver_naming_the_subject(
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
    _serialize(client, json.dumps(ORDER_V1), ORDER, topics["orders"])  # the input's subject
    subject = f"{topics['orders-checked']}-value"
    taken = {"type": "record", "name": "Other", "fields": [{"name": "id", "type": "string"}]}
    _serialize(client, json.dumps(taken), {"id": "x"}, topics["orders-checked"])
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


def _order_answers() -> list[dict[str, Any]]:
    """A second App: order ids (json) with the Avro Table's value looked up, and joined."""
    api = {"apiVersion": "rillet.io/v1alpha1"}
    return [
        {**api, "kind": "Topic", "metadata": {"name": "questions"}, "spec": {"partitions": 1}},
        {**api, "kind": "Topic", "metadata": {"name": "answers"}, "spec": {"partitions": 1}},
        {
            **api,
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
        },
    ]


def test_an_avro_table_is_looked_up_joined_and_printed_as_json(
    registry: tuple[runspecs.SchemaRegistry, SchemaRegistryClient],
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
) -> None:
    spec_registry, client = registry
    documents = _documents()
    documents[-1]["spec"]["pipeline"]["sql"] = (
        "SELECT id, amount, at, tags, note, address FROM orders"
    )
    documents += _order_answers()
    topics = rt.privatize(documents, kafka_prefix)
    rt.create_topics(kafka_admin, [NewTopic(t, 1, 1) for t in topics.values()])
    v1 = json.dumps(ORDER_V1)
    orders = topics["orders"]
    rt.produce(
        kafka_bootstrap,
        orders,
        [
            ("a", _serialize(client, v1, {**ORDER, "note": "old"}, orders)),
            (
                "b",
                _serialize(client, v1, {**ORDER, "id": 8, "address": {"city": "Bergen"}}, orders),
            ),
            ("c", _serialize(client, v1, ORDER, orders)),  # id 7 again: the Table keeps this
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
        # A value of a version the reader has not seen, as a writer with a new column writes it.
        table = topics["orders-by-id"]
        latest = client.get_latest_version(f"{table}-value").schema.schema_str
        assert latest is not None
        newer = with_field(json.loads(latest), CHANNEL)
        moved = {**ORDER, "amount": Decimal("99.99"), "address": {"city": "Rome"}}
        moved_json = {"amount": "99.99", "address": {"city": "Rome"}, "channel": "web"}
        rt.produce(kafka_bootstrap, table, [("7", _serialize(client, newer, moved, table))])
        rt.produce(kafka_bootstrap, topics["questions"], [("7", json.dumps({"order": "7"}))])
        wait_for(lambda: len(answers()) == 4, timeout=180, what="an answer from a newer version")
        assert driver.failure() is None

    assert sorted(answers()[:3], key=lambda a: a["order"]) == [
        {"order": "7", "looked_up": 12.34, "city": "Oslo"},
        {"order": "8", "looked_up": 12.34, "city": "Bergen"},
        {"order": "9", "looked_up": None, "city": None},
    ]
    assert answers()[3] == {"order": "7", "looked_up": 99.99, "city": "Rome"}
    manifest = rt.write_manifests(documents, tmp_path / "manifests.yaml")
    get = functools.partial(
        rt.cli, "table", "get", "orders-by-id", "--file", str(manifest), "-b", kafka_bootstrap
    )
    got = get("8")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout) == {**ORDER_JSON, "id": 8, "address": {"city": "Bergen"}}
    # Each value with its own writer's schema: 7's has the newer version's field.
    seven = {**json.loads(got.stdout), "id": 7, **moved_json}
    assert json.loads(get("7").stdout) == seven
    watch = [sys.executable, "-m", "rillet.cli", "table", "get", "orders-by-id", "7", "-w"]
    with watching.watched(
        [*watch, "--file", str(manifest), "-b", kafka_bootstrap], env=rt.cli_env()
    ) as lines:
        key, value = next(lines).split("\t")
        assert (key, json.loads(value)) == ("7", seven)
        rt.produce(kafka_bootstrap, topics["orders-by-id"], [("7", None)])
        assert next(lines) == "7\t(deleted)"


def test_a_registry_that_goes_away_is_waited_for_not_taken_for_bad_data(
    registry: tuple[runspecs.SchemaRegistry, SchemaRegistryClient],
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="rillet.runtime.driver.schemacatalog")
    spec_registry, client = registry
    documents = rt.load_manifests(EXAMPLE)
    app = documents[-1]["spec"]
    app["pipeline"]["sql"] = "SELECT id, amount FROM orders"
    app["outputs"] = app["outputs"][:1]
    topics = rt.privatize(documents, kafka_prefix)
    rt.create_topics(kafka_admin, [NewTopic(t, 1, 1) for t in topics.values()])
    orders = topics["orders"]
    rt.produce(
        kafka_bootstrap, orders, [("a", _serialize(client, json.dumps(ORDER_V1), ORDER, orders))]
    )
    address = urlsplit(spec_registry.url)
    assert address.hostname is not None
    assert address.port is not None
    read = AvroDeserializer(client)
    value = SerializationContext(topics["orders-checked"], MessageField.VALUE)

    def written() -> list[Any]:
        entries = rt.read_topic(kafka_bootstrap, topics["orders-checked"])
        return [read(entry.value, value) for entry in entries]

    with tcpgate.gate_to((address.hostname, address.port)) as gate:
        through_gate = address._replace(netloc=f"127.0.0.1:{gate.port}").geturl()
        spec = rt.build_spec(
            documents,
            bootstrap=kafka_bootstrap,
            checkpoint=tmp_path / "ck",
            available_now=False,
            schema_registry=runspecs.SchemaRegistry(url=through_gate, request_timeout_seconds=2),
        )
        with rt.driven(spec) as driver:
            wait_for(lambda: len(written()) == 1, timeout=180, what="the App's first record")
            gate.close()
            # A version the App has not seen: it must ask the registry, which is away.
            newer = with_field(ORDER_V1, CHANNEL)
            later = _serialize(client, newer, {**ORDER, "id": 8, "channel": "app"}, orders)
            rt.produce(kafka_bootstrap, orders, [("b", later)])
            # Past the registry client's own retries: the driver's, which wait for it to return.
            wait_for(
                lambda: "schema registry unreachable" in caplog.text,
                timeout=120,
                what="the driver to ask again and again",
            )
            assert gate.dropped >= 2

            # A registry that takes the request and never answers: the request times out
            # and is asked again (it used to wait forever, and the App with it).
            gate.silence()
            caplog.clear()
            wait_for(
                lambda: (
                    gate.held >= 1
                    and any(
                        "unreachable" in r.getMessage() and "Timeout" in r.getMessage()
                        for r in caplog.records
                    )
                ),
                timeout=120,
                what="the driver to give up on an unanswered request and ask again",
            )

            assert len(written()) == 1
            assert rt.read_topic(kafka_bootstrap, topics["orders-dlq"]) == []
            assert driver.failure() is None
            gate.open()
            wait_for(
                lambda: len(written()) == 2, timeout=180, what="the record, once it can be read"
            )
            assert driver.failure() is None

    assert written()[1] == {"id": 8, "amount": ORDER["amount"]}
    assert rt.read_topic(kafka_bootstrap, topics["orders-dlq"]) == []
