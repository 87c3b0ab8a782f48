"""Resolving an App and its Topics and Tables into the run spec its driver executes (the Spark
conf built from it: test_run_spark_defaults).

Test plan:
- each example resolves: Kafka topic names, formats, schemas, keys, windows, dead-letter topic,
  consumer group `rillet.<namespace>.<app>`, a global Table input broadcast, checkpoint
  directories per query under the App's own location when it has one; a window's expiry
  defaults to the larger of its size and a day; objects of other API groups are ignored;
- shuffle partitions come from sparkConf, else the output Tables, else the input Topics;
- missing Topics and Tables are all named at once; a file with several Apps needs --app; without
  any checkpoint location resolution fails;
- event time, maxOffsetsPerTrigger and output formats reach the run spec; topic outputs
  default to a string key and a JSON value; delivery is at least once unless an output or the
  dead letters ask for exactly once;
- lookups reach the run spec, and a lookup of a windowed Table is refused;
- the run spec survives JSON (how the operator hands it to the driver).
"""

from __future__ import annotations

import pytest
import yaml

from rillet.driverapi import runspecs
from rillet.reconcile import manifests, runparts
from tests.unit import wordcount_inputs

_documents = wordcount_inputs.example_documents
_spec = wordcount_inputs.example_run_spec


def test_wordcount_resolves_to_topics_formats_and_a_consumer_group() -> None:
    spec = _spec("wordcount.yaml")

    assert (spec.app, spec.namespace, spec.consumer_group) == (
        "wordcount",
        "default",
        "rillet.default.wordcount",
    )
    assert spec.inputs == (
        runspecs.InputSpec(
            name="sentences",
            kind="topic",
            topic="sentences",
            format="string",
            starting_offsets="earliest",
            partitions=3,
        ),
    )
    assert spec.outputs == (
        runspecs.OutputSpec(
            id="table-word-counts",
            kind="table",
            topic="word-counts",
            key_columns=("word",),
            mode="upsert",
            key_format="string",
            value_format="json",
        ),
    )
    assert spec.shuffle_partitions == 3  # no Table partitions: the input topic's
    assert spec.dead_letter_topic is None
    assert spec.trigger == runspecs.TriggerSpec()


def test_windowed_table_output_has_its_window_trigger_and_json_key() -> None:
    spec = _spec("windowed-clicks.yaml", namespace="web")

    (output,) = spec.outputs
    assert output.key_format == "json"
    assert output.key_columns == ("page", "window_start")
    assert output.window == runspecs.WindowSpec(
        type="tumbling", size_ms=300_000, expiry_ms=3_600_000
    )
    assert spec.trigger.processing_time_ms == 30_000
    assert spec.shuffle_partitions == 6  # the App's sparkConf
    assert spec.consumer_group == "rillet.web.clicks-per-page"
    assert spec.inputs[0].value_schema == "user_id STRING, page STRING, ts TIMESTAMP"


def test_table_input_reads_the_tables_topic_schema_and_is_broadcast_when_global() -> None:
    spec = _spec("enrich-orders.yaml", app_name="enrich-orders")

    orders, customers = spec.inputs
    assert (orders.kind, orders.format, orders.starting_offsets) == ("topic", "json", "latest")
    assert customers == runspecs.InputSpec(
        name="customers",
        kind="table",
        topic="customers",
        format="json",
        value_schema="customer_id STRING, name STRING, tier STRING",
        starting_offsets="earliest",
        broadcast=True,
    )
    assert spec.dead_letter_topic == "orders-dlq"
    assert spec.outputs[0].id == "topic-orders-enriched"
    assert spec.stream_inputs == (orders,)


def test_topic_names_come_from_spec_topic_name_when_set() -> None:
    documents = _documents("wordcount.yaml")
    documents[0]["spec"]["topicName"] = "prod.sentences.v2"
    documents[1]["spec"] = {**documents[1]["spec"], "topicName": "prod.counts", "partitions": 12}

    spec = manifests.build_run_spec_from_manifests(
        documents, bootstrap_servers="k:9092", checkpoint_location="/ck"
    )

    assert spec.inputs[0].topic == "prod.sentences.v2"
    assert spec.outputs[0].topic == "prod.counts"
    assert spec.shuffle_partitions == 12  # the output Table's partitions win over the input's


def test_missing_objects_are_all_named() -> None:
    documents = [d for d in _documents("enrich-orders.yaml") if d["kind"] == "App"]

    with pytest.raises(runparts.UnresolvedError) as raised:
        manifests.build_run_spec_from_manifests(
            documents,
            bootstrap_servers="k:9092",
            app_name="enrich-orders",
            checkpoint_location="/ck",
        )

    assert raised.value.problems == [
        "Topic orders not found",
        "Table customers not found",
        "Topic orders-enriched not found",
        "Topic orders-dlq not found",
    ]


def test_several_apps_need_a_name() -> None:
    with pytest.raises(ValueError, match=r"2 Apps \(customers-loader, enrich-orders\): name one"):
        _spec("enrich-orders.yaml")
    with pytest.raises(ValueError, match="no App 'nope'"):
        _spec("enrich-orders.yaml", app_name="nope")


def test_checkpoint_of_the_app_wins_and_each_query_gets_a_directory() -> None:
    documents = _documents("enrich-orders.yaml")
    documents[-1]["spec"]["checkpoint"] = {"location": "s3a://bucket/enrich/"}

    spec = manifests.build_run_spec_from_manifests(
        documents,
        bootstrap_servers="k:9092",
        app_name="enrich-orders",
        checkpoint_location="/default",
    )

    assert runspecs.output_checkpoint(spec, spec.outputs[0]) == (
        "s3a://bucket/enrich/outputs/topic-orders-enriched"
    )
    assert runspecs.dead_letter_checkpoint(spec, spec.inputs[0]) == (
        "s3a://bucket/enrich/dead-letters/orders"
    )


def test_without_any_checkpoint_location_resolution_fails() -> None:
    with pytest.raises(runparts.UnresolvedError, match="no checkpoint location"):
        manifests.build_run_spec_from_manifests(_documents("wordcount.yaml"), bootstrap_servers="k")


def test_default_window_expiry_is_the_larger_of_size_and_a_day() -> None:
    documents = _documents("windowed-clicks.yaml")
    del documents[1]["spec"]["window"]["expiry"]

    spec = manifests.build_run_spec_from_manifests(
        documents, bootstrap_servers="k", checkpoint_location="/ck"
    )

    assert spec.outputs[0].window is not None
    assert spec.outputs[0].window.expiry_ms == 24 * 3_600_000


def test_run_spec_round_trips_through_json() -> None:
    spec = _spec("enrich-orders.yaml", app_name="enrich-orders")

    assert runspecs.RunSpec.model_validate_json(spec.model_dump_json()) == spec


def test_objects_of_other_api_groups_are_ignored() -> None:
    documents = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
        *_documents("wordcount.yaml"),
        None,
    ]

    spec = manifests.build_run_spec_from_manifests(
        documents, bootstrap_servers="k", checkpoint_location="/ck"
    )

    assert spec.app == "wordcount"


def test_event_time_max_offsets_and_output_formats_reach_the_run_spec() -> None:
    documents = _documents("wordcount.yaml")
    app = documents[-1]["spec"]
    app["inputs"][0] |= {
        "eventTime": {"column": "timestamp", "allowedLateness": "1m30s"},
        "maxOffsetsPerTrigger": 5000,
    }
    app["outputs"].append(
        {
            "topicRef": {"name": "sentences"},
            "keyColumns": ["word"],
            "keyFormat": "json",
            "valueColumns": ["word"],
            "valueFormat": "string",
        }
    )

    spec = manifests.build_run_spec_from_manifests(
        documents, bootstrap_servers="k:9092", checkpoint_location="/ck"
    )

    assert spec.inputs[0].event_time == runspecs.EventTimeSpec(
        column="timestamp", allowed_lateness_ms=90_000
    )
    assert spec.inputs[0].max_offsets_per_trigger == 5000
    written = spec.outputs[-1]
    assert (written.key_format, written.value_format) == ("json", "string")


def test_topic_outputs_default_to_a_string_key_and_a_json_value() -> None:
    documents = _documents("wordcount.yaml")
    documents[-1]["spec"]["outputs"].append(
        {"topicRef": {"name": "sentences"}, "keyColumns": ["word"]}
    )

    spec = manifests.build_run_spec_from_manifests(
        documents, bootstrap_servers="k:9092", checkpoint_location="/ck"
    )

    assert (spec.outputs[-1].key_format, spec.outputs[-1].value_format) == ("string", "json")
    assert spec.inputs[0].event_time is None
    assert spec.inputs[0].max_offsets_per_trigger is None


def test_delivery_is_at_least_once_unless_an_output_or_the_dead_letters_ask_for_exactly_once() -> (
    None
):
    documents = _documents("wordcount.yaml")
    app = documents[-1]["spec"]
    app["outputs"] += [
        {"topicRef": {"name": "sentences"}, "keyColumns": ["word"], "delivery": "ExactlyOnce"},
        {"topicRef": {"name": "sentences"}, "from": "x", "delivery": "AtLeastOnce"},
    ]
    app["deadLetterTopic"] = {"topicName": "rejects", "delivery": "ExactlyOnce"}

    spec = manifests.build_run_spec_from_manifests(
        documents, bootstrap_servers="k:9092", checkpoint_location="/ck"
    )

    assert [o.exactly_once for o in spec.outputs] == [False, True, False]
    assert spec.dead_letter_exactly_once
    assert not _spec("wordcount.yaml").dead_letter_exactly_once


_LOOKUP = """
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: orders}
spec: {partitions: 3}
---
apiVersion: rillet.io/v1alpha1
kind: Table
metadata: {name: customers}
spec: {valueSchema: "customer_id STRING, tier STRING"%s}
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata: {name: enrich}
spec:
  image: rillet/spark-runtime:0.1.0
  inputs:
    - name: orders
      topicRef: {name: orders}
      schema: "order_id STRING, customer_id STRING"
      lookups: [{table: customers, keyColumns: [customer_id]}]
    - name: customers
      tableRef: {name: customers}
  pipeline: {sql: "SELECT order_id, customers.tier FROM orders"}
  outputs: [{topicRef: {name: orders}}]
"""


def test_lookups_reach_the_run_spec_and_a_windowed_table_is_refused() -> None:
    documents = list(yaml.safe_load_all(_LOOKUP % ""))
    spec = manifests.build_run_spec_from_manifests(
        documents, bootstrap_servers="kafka:9092", checkpoint_location="/ck"
    )
    orders, customers = spec.inputs
    assert orders.lookups == (runspecs.LookupSpec(table="customers", key_columns=("customer_id",)),)
    assert (customers.kind, customers.lookups) == ("table", ())

    windowed = list(yaml.safe_load_all(_LOOKUP % ", window: {type: tumbling, size: 1h}"))
    with pytest.raises(
        runparts.UnresolvedError,
        match="input orders looks up Table input customers, which is windowed",
    ):
        manifests.build_run_spec_from_manifests(
            windowed, bootstrap_servers="kafka:9092", checkpoint_location="/ck"
        )
