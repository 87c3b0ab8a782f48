"""Table data: invalid Rillet objects, and what the apiserver says when it refuses them.

Each case is a manifest the apiserver must reject, with a substring of its error message that
names the field; the manifest is sent both with `kubectl create` (what a first `kubectl apply`
does) and with `kubectl apply --server-side`. A case with `before` is an update: `before` is
applied first (it is valid) and `manifest` is then applied over it with server-side apply; these
exercise the transition rules (oldSelf).

The same table drives two tests: tests/integration/test_crds.py sends every case to the real
apiserver; tests/unit/test_api_validation.py checks that the pydantic models refuse every create
case too, and accept both sides of every update case (only the change is invalid).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from tests.integration import invalid_spark_confs

API_VERSION = "rillet.io/v1alpha1"
IMAGE = "rillet/spark-runtime:0.1.0"
DROP = object()  # in an override: remove this key


@dataclasses.dataclass(frozen=True)
class Case:
    """One invalid object (or invalid change) and the expected error."""

    id: str
    manifest: dict[str, Any]
    expect: str
    before: dict[str, Any] | None = None
    # Where server-side apply words it differently (it builds a typed patch before validating).
    expect_ssa: str | None = None


def merged(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `override` merged in, recursively for mappings; DROP removes a key."""
    result = copy.deepcopy(dict(base))
    for key, value in override.items():
        if value is DROP:
            result.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def topic(spec: Mapping[str, Any] | None = None, name: str = "orders") -> dict[str, Any]:
    """A valid Topic, with `spec` merged into its spec."""
    base = {
        "apiVersion": API_VERSION,
        "kind": "Topic",
        "metadata": {"name": name},
        "spec": {"partitions": 3},
    }
    return merged(base, {"spec": spec or {}})


def table(spec: Mapping[str, Any] | None = None, name: str = "counts") -> dict[str, Any]:
    """A valid Table, with `spec` merged into its spec."""
    base = {
        "apiVersion": API_VERSION,
        "kind": "Table",
        "metadata": {"name": name},
        "spec": {"valueSchema": "word STRING, count BIGINT"},
    }
    return merged(base, {"spec": spec or {}})


WINDOW = {"type": "hopping", "size": "10m", "step": "5m", "expiry": "1h"}


def app(spec: Mapping[str, Any] | None = None, name: str = "wordcount") -> dict[str, Any]:
    """A valid App, with `spec` merged into its spec (lists are replaced, not merged)."""
    base = {
        "apiVersion": API_VERSION,
        "kind": "App",
        "metadata": {"name": name},
        "spec": {
            "image": IMAGE,
            "inputs": [{"name": "lines", "topicRef": {"name": "lines"}, "format": "string"}],
            "pipeline": {"sql": "SELECT value AS word, count(*) AS n FROM lines GROUP BY value"},
            "outputs": [{"tableRef": {"name": "counts"}, "keyColumns": ["word"]}],
        },
    }
    return merged(base, {"spec": spec or {}})


def app_input(**fields: Any) -> dict[str, Any]:
    """One input: a json Topic input with a schema, with `fields` merged in."""
    base = {"name": "clicks", "topicRef": {"name": "clicks"}, "schema": "page STRING"}
    return merged(base, fields)


def app_output(**fields: Any) -> dict[str, Any]:
    """One output: a Topic output, with `fields` merged in."""
    return merged({"topicRef": {"name": "out"}}, fields)


# An inline Protobuf schema (its text is the driver's to compile: the apiserver takes any).
PROTO = 'syntax = "proto3";\npackage shop;\nmessage Order { int64 id = 1; }\n'

CASES: tuple[Case, ...] = (
    # --- Topic: types, ranges, required fields
    Case("topic-partitions-string", topic({"partitions": "three"}), "spec.partitions"),
    Case(
        "topic-partitions-zero",
        topic({"partitions": 0}),
        "spec.partitions in body should be greater than or equal to 1",
    ),
    Case(
        "topic-partitions-negative",
        topic({"partitions": -4}),
        "spec.partitions in body should be greater than or equal to 1",
    ),
    Case(
        "topic-partitions-missing", topic({"partitions": DROP}), "spec.partitions: Required value"
    ),
    Case("topic-spec-missing", merged(topic(), {"spec": DROP}), "spec: Required value"),
    Case(
        "topic-replication-factor-zero",
        topic({"replicationFactor": 0}),
        "spec.replicationFactor in body should be greater than or equal to 1",
    ),
    Case(
        "topic-replication-factor-huge",
        topic({"replicationFactor": 40000}),
        "spec.replicationFactor in body should be less than or equal to 32767",
    ),
    Case(
        "topic-partitions-past-int32",
        topic({"partitions": 2**31}),
        "spec.partitions in body should be less than or equal to 2147483647",
    ),
    Case(
        "topic-partitions-past-int64",
        topic({"partitions": 2**63}),
        "spec.partitions",
    ),
    Case(
        "topic-deletion-policy-enum",
        topic({"deletionPolicy": "Orphan"}),
        'spec.deletionPolicy: Unsupported value: "Orphan"',
    ),
    # --- Topic: Kafka topic names
    Case("topic-name-dot", topic({"topicName": "."}), "cannot be '.' or '..'"),
    Case("topic-name-dot-dot", topic({"topicName": ".."}), "cannot be '.' or '..'"),
    Case(
        "topic-name-internal", topic({"topicName": "__consumer_offsets"}), "cannot start with '_'"
    ),
    Case("topic-name-internal-schemas", topic({"topicName": "_schemas"}), "cannot start with '_'"),
    Case("table-name-internal", table({"topicName": "_counts"}), "cannot start with '_'"),
    Case(
        "app-external-input-internal",
        app({"inputs": [app_input(topicRef=DROP, external={"topicName": "__transaction_state"})]}),
        "cannot start with '_'",
    ),
    Case(
        "app-dead-letter-internal",
        app({"deadLetterTopic": {"topicName": "_dead"}}),
        "cannot start with '_'",
    ),
    Case("topic-name-space", topic({"topicName": "a b"}), "spec.topicName in body should match"),
    Case("topic-name-unicode", topic({"topicName": "ü"}), "spec.topicName in body should match"),
    Case("topic-name-empty", topic({"topicName": ""}), "spec.topicName"),
    Case("topic-name-too-long", topic({"topicName": "t" * 250}), "spec.topicName: Too long"),
    Case(
        "topic-default-name-too-long",
        merged(topic(), {"metadata": {"name": ".".join(["n" * 62] * 4)[:250]}}),
        "too long for a Kafka topic name: set spec.topicName",
    ),
    # --- Topic: unknown fields
    Case("topic-unknown-spec-field", topic({"partition": 3}), "spec.partition"),
    Case("topic-unknown-top-level-field", merged(topic(), {"specification": {}}), "specification"),
    # --- Topic: config
    Case(
        "topic-config-unknown-key",
        topic({"config": {"log.retention.ms": 1000}}),
        "config key log.retention.ms is not a Kafka topic config",
    ),
    Case(
        "topic-config-two-unknown-keys",
        topic({"config": {"retention.ms": 1, "retention.hours": 1, "segment.size": 1}}),
        "is not a Kafka topic config",
    ),
    Case(
        "topic-config-bool-value",
        topic({"config": {"preallocate": True}}),
        "spec.config.preallocate",
    ),
    Case(
        "topic-config-float-value",
        topic({"config": {"min.cleanable.dirty.ratio": 0.5}}),
        "spec.config.min.cleanable.dirty.ratio",
    ),
    Case(
        "topic-config-object-value",
        topic({"config": {"retention.ms": {"days": 7}}}),
        "spec.config.retention.ms",
    ),
    Case(
        "topic-config-int-for-boolean",
        topic({"config": {"preallocate": 1}}),
        'config preallocate needs the string "true" or "false"',
    ),
    Case(
        "topic-config-words-for-integer",
        topic({"config": {"retention.ms": "7 days"}}),
        "config retention.ms needs a whole number",
    ),
    Case(
        "topic-config-int-setting-past-int32",
        topic({"config": {"max.message.bytes": 2**31}}),
        "config max.message.bytes is a 32-bit integer in Kafka (INT)",
    ),
    Case(
        "topic-config-long-setting-past-int64",
        topic({"config": {"retention.ms": 2**63}}),
        "spec.config.retention.ms",
    ),
    Case(
        "topic-config-bad-choice",
        topic({"config": {"cleanup.policy": "remove"}}),
        "config cleanup.policy must be one of",
    ),
    Case(
        "topic-config-bad-compression",
        topic({"config": {"compression.type": "brotli"}}),
        "config compression.type must be one of",
    ),
    # --- Topic: updates
    Case(
        "topic-partitions-decreased",
        topic({"partitions": 2}),
        "partitions cannot decrease",
        before=topic({"partitions": 3}),
    ),
    Case(
        "topic-name-changed",
        topic({"topicName": "orders.v2"}),
        "topicName cannot change once set",
        before=topic({"topicName": "orders.v1"}),
    ),
    Case(
        "topic-name-added",
        topic({"topicName": "orders.v2"}),
        "topicName cannot be added or removed",
        before=topic(),
    ),
    Case(
        "topic-name-removed",
        topic(),
        "topicName cannot be added or removed",
        before=topic({"topicName": "orders.v1"}),
    ),
    Case(
        "topic-replication-factor-changed",
        topic({"replicationFactor": 3}),
        "replicationFactor cannot change once set",
        before=topic({"replicationFactor": 1}),
    ),
    # --- Table
    Case(
        "table-partitions-zero",
        table({"partitions": 0}),
        "spec.partitions in body should be greater than or equal to 1",
    ),
    Case(
        "table-partitions-past-int32",
        table({"partitions": 2**31}),
        "spec.partitions in body should be less than or equal to 2147483647",
    ),
    Case(
        "table-key-format-enum",
        table({"keyFormat": "avro"}),
        'spec.keyFormat: Unsupported value: "avro"',
    ),
    Case(
        "table-value-avro-for-json",
        table({"valueAvro": {"subject": "counts-value"}}),
        "valueAvro applies only when valueFormat is avro",
    ),
    Case(
        "table-value-protobuf-for-json",
        table({"valueProtobuf": {"subject": "counts-value"}}),
        "valueProtobuf applies only when valueFormat is protobuf",
    ),
    Case(
        "table-value-protobuf-for-avro",
        table({"valueSchema": DROP, "valueFormat": "avro", "valueProtobuf": {"version": 1}}),
        "valueProtobuf applies only when valueFormat is protobuf",
    ),
    Case(
        "table-value-avro-for-protobuf",
        table({"valueSchema": DROP, "valueFormat": "protobuf", "valueAvro": {"version": 1}}),
        "valueAvro applies only when valueFormat is avro",
    ),
    Case(
        "table-value-protobuf-schema-without-message",
        table(
            {
                "valueSchema": DROP,
                "valueFormat": "protobuf",
                "valueProtobuf": {"schema": 'syntax = "proto3"; message V { int64 n = 1; }'},
            }
        ),
        "an inline Protobuf schema needs the message",
    ),
    Case(
        "table-value-protobuf-schema-and-version",
        table(
            {
                "valueSchema": DROP,
                "valueFormat": "protobuf",
                "valueProtobuf": {
                    "schema": 'syntax = "proto3"; message V { int64 n = 1; }',
                    "message": "V",
                    "version": 1,
                },
            }
        ),
        "give the Protobuf schema inline (schema) or name a registered version",
    ),
    Case(
        "table-value-schema-without-json",
        table({"valueFormat": "string"}),
        "valueSchema applies only when valueFormat is json",
    ),
    Case("table-global-string", table({"global": "yes"}), "spec.global"),
    Case(
        "table-serve-replicas-zero",
        table({"serve": {"replicas": 0}}),
        "spec.serve.replicas in body should be greater than or equal to 1",
    ),
    Case(
        "table-serve-memory-bytes-unit",
        table({"serve": {"memory": "256MB"}}),
        "spec.serve.memory in body should match",
    ),
    Case("table-serve-unknown-field", table({"serve": {"port": 80}}), "spec.serve.port"),
    Case(
        "table-cleanup-policy-delete",
        table({"config": {"cleanup.policy": "delete"}}),
        "cleanup.policy of a Table must keep compaction",
    ),
    Case(
        "table-window-type-enum",
        table({"window": {"type": "sliding", "size": "5m"}}),
        'spec.window.type: Unsupported value: "sliding"',
    ),
    Case(
        "table-window-size-missing",
        table({"window": {"type": "tumbling"}}),
        "spec.window.size: Required value",
    ),
    Case(
        "table-window-size-words",
        table({"window": {"type": "tumbling", "size": "5 minutes"}}),
        "spec.window.size in body should match",
    ),
    Case(
        "table-window-size-days",
        table({"window": {"type": "tumbling", "size": "1d"}}),
        "spec.window.size in body should match",
    ),
    Case(
        "table-window-size-zero",
        table({"window": {"type": "tumbling", "size": "0s"}}),
        "window.size must be longer than 0s",
    ),
    Case(
        "table-window-tumbling-with-step",
        table({"window": {"type": "tumbling", "size": "5m", "step": "1m"}}),
        "window.step is required for hopping windows and not allowed for tumbling windows",
    ),
    Case(
        "table-window-hopping-without-step",
        table({"window": {"type": "hopping", "size": "5m"}}),
        "window.step is required for hopping windows",
    ),
    Case(
        "table-window-step-longer-than-size",
        table({"window": {"type": "hopping", "size": "5m", "step": "10m"}}),
        "window.step must not be longer than window.size",
    ),
    Case(
        "table-window-step-longer-mixed-units",
        table({"window": {"type": "hopping", "size": "1h", "step": "1h30m"}}),
        "window.step must not be longer than window.size",
    ),
    Case(
        "table-window-expiry-shorter-than-size",
        table({"window": {"type": "tumbling", "size": "1h", "expiry": "59m"}}),
        "window.expiry must not be shorter than window.size",
    ),
    Case(
        "table-window-unknown-field",
        table({"window": {"type": "tumbling", "size": "1h", "grace": "5m"}}),
        "spec.window.grace",
    ),
    Case(
        "table-partitions-decreased",
        table({"partitions": 4}),
        "partitions cannot decrease",
        before=table({"partitions": 6}),
    ),
    Case(
        "table-partitions-removed",
        table(),
        "partitions cannot be removed once set",
        before=table({"partitions": 6}),
    ),
    Case(
        "table-window-changed",
        table({"window": merged(WINDOW, {"size": "20m"})}),
        "window cannot change after creation",
        before=table({"window": WINDOW}),
    ),
    Case(
        "table-window-added",
        table({"window": WINDOW}),
        "window cannot be added or removed",
        before=table(),
    ),
    Case(
        "table-topic-name-changed",
        table({"topicName": "counts-v2"}),
        "topicName cannot change once set",
        before=table({"topicName": "counts-v1"}),
    ),
    # --- App: required fields and types
    Case("app-image-missing", app({"image": DROP}), "spec.image: Required value"),
    Case("app-image-empty", app({"image": ""}), "spec.image"),
    Case("app-inputs-empty", app({"inputs": []}), "spec.inputs"),
    Case("app-outputs-missing", app({"outputs": DROP}), "spec.outputs: Required value"),
    Case("app-suspend-string", app({"suspend": "yes"}), "spec.suspend"),
    Case("app-unknown-spec-field", app({"replicas": 3}), "spec.replicas"),
    Case(
        "app-unknown-nested-field", app({"scaling": {"maxExecutor": 3}}), "spec.scaling.maxExecutor"
    ),
    Case("app-name-too-long", app(name="a" * 48), "metadata.name of an App names its pods"),
    Case("app-name-with-dot", app(name="word.count"), "metadata.name of an App names its pods"),
    Case(
        "app-name-starts-with-digit",
        app(name="1wordcount"),
        "metadata.name of an App names its pods",
    ),
    # --- App: inputs
    Case(
        "app-input-two-refs",
        app({"inputs": [app_input(tableRef={"name": "counts"})]}),
        "an input needs exactly one of topicRef, tableRef or external",
    ),
    Case(
        "app-input-no-ref",
        app({"inputs": [app_input(topicRef=DROP)]}),
        "an input needs exactly one of topicRef, tableRef or external",
    ),
    Case(
        "app-input-json-without-schema",
        app({"inputs": [app_input(schema=DROP)]}),
        "schema is required for json topic inputs",
    ),
    Case(
        "app-input-schema-for-string",
        app({"inputs": [app_input(format="string")]}),
        "schema applies only to json inputs",
    ),
    Case(
        "app-input-avro-for-json",
        app({"inputs": [app_input(avro={"subject": "orders-value"})]}),
        "avro applies only to avro inputs",
    ),
    Case(
        "app-input-protobuf-for-avro",
        app({"inputs": [app_input(schema=DROP, format="avro", protobuf={"version": 1})]}),
        "protobuf applies only to protobuf inputs",
    ),
    Case(
        "app-input-protobuf-schema-without-message",
        app({"inputs": [app_input(schema=DROP, format="protobuf", protobuf={"schema": PROTO})]}),
        "an inline Protobuf schema needs the message read or written",
    ),
    Case(
        "app-input-name-not-identifier",
        app({"inputs": [app_input(name="click-stream")]}),
        "spec.inputs[0].name in body should match",
    ),
    Case(
        "app-input-names-repeated",
        app({"inputs": [app_input(), app_input(topicRef={"name": "other"})]}),
        "spec.inputs[1]: Duplicate value",
        expect_ssa='.spec.inputs: duplicate entries for key [name="clicks"]',
    ),
    Case(
        "app-input-starting-offsets-enum",
        app({"inputs": [app_input(startingOffsets="beginning")]}),
        'spec.inputs[0].startingOffsets: Unsupported value: "beginning"',
    ),
    Case(
        "app-input-external-bad-topic",
        app({"inputs": [app_input(topicRef=DROP, external={"topicName": "a b"})]}),
        "spec.inputs[0].external.topicName in body should match",
    ),
    Case(
        "app-input-table-with-event-time",
        app(
            {
                "inputs": [
                    app_input(
                        topicRef=DROP,
                        tableRef={"name": "counts"},
                        eventTime={"allowedLateness": "30s"},
                    )
                ]
            }
        ),
        "eventTime and maxOffsetsPerTrigger apply to topic inputs",
    ),
    Case(
        "app-input-table-with-max-offsets",
        app({"inputs": [app_input(topicRef=DROP, tableRef={"name": "c"}, maxOffsetsPerTrigger=9)]}),
        "eventTime and maxOffsetsPerTrigger apply to topic inputs",
    ),
    Case(
        "app-lookup-on-a-table-input",
        app(
            {
                "inputs": [
                    app_input(
                        topicRef=DROP,
                        tableRef={"name": "c"},
                        lookups=[{"table": "c", "keyColumns": ["page"]}],
                    )
                ]
            }
        ),
        "lookups apply to topic inputs",
    ),
    Case(
        "app-lookup-of-no-table-input",
        app({"inputs": [app_input(lookups=[{"table": "users", "keyColumns": ["page"]}])]}),
        "lookups[].table must name a tableRef input of this App",
    ),
    Case(
        "app-lookup-without-key-columns",
        app(
            {
                "inputs": [
                    app_input(lookups=[{"table": "users", "keyColumns": []}]),
                    {"name": "users", "tableRef": {"name": "users"}},
                ]
            }
        ),
        "spec.inputs[0].lookups[0].keyColumns",
    ),
    Case(
        "app-input-max-offsets-zero",
        app({"inputs": [app_input(maxOffsetsPerTrigger=0)]}),
        "spec.inputs[0].maxOffsetsPerTrigger: Invalid value: 0",
    ),
    Case(
        "app-input-event-time-without-lateness",
        app({"inputs": [app_input(eventTime={"column": "ts"})]}),
        "spec.inputs[0].eventTime.allowedLateness: Required value",
    ),
    Case(
        "app-input-event-time-lateness-not-duration",
        app({"inputs": [app_input(eventTime={"allowedLateness": "30 seconds"})]}),
        "spec.inputs[0].eventTime.allowedLateness in body should match",
    ),
    # --- App: pipeline
    Case(
        "app-pipeline-both",
        app({"pipeline": {"python": {"entrypoint": "wordcount.pipeline:build"}}}),
        "pipeline needs exactly one of sql or python",
    ),
    Case(
        "app-pipeline-neither",
        app({"pipeline": {"sql": DROP}}),
        "pipeline needs exactly one of sql or python",
    ),
    Case(
        "app-python-entrypoint-file",
        app({"pipeline": {"sql": DROP, "python": {"entrypoint": "pipeline.py"}}}),
        "spec.pipeline.python.entrypoint in body should match",
    ),
    Case(
        "app-python-entrypoint-no-function",
        app({"pipeline": {"sql": DROP, "python": {"entrypoint": "wordcount.pipeline"}}}),
        "spec.pipeline.python.entrypoint in body should match",
    ),
    # --- App: outputs
    Case(
        "app-output-two-refs",
        app({"outputs": [app_output(tableRef={"name": "counts"}, keyColumns=["word"])]}),
        "an output needs exactly one of topicRef or tableRef",
    ),
    Case(
        "app-output-table-without-keys",
        app({"outputs": [{"tableRef": {"name": "counts"}}]}),
        "keyColumns is required for tableRef outputs",
    ),
    Case(
        "app-output-table-append",
        app(
            {
                "outputs": [
                    {"tableRef": {"name": "counts"}, "keyColumns": ["word"], "mode": "append"}
                ]
            }
        ),
        "mode of a tableRef output must be upsert",
    ),
    Case(
        "app-output-upsert-without-keys",
        app({"outputs": [app_output(mode="upsert")]}),
        "keyColumns is required for tableRef outputs and upsert mode",
    ),
    Case(
        "app-output-table-with-formats",
        app(
            {
                "outputs": [
                    {"tableRef": {"name": "counts"}, "keyColumns": ["w"], "keyFormat": "json"}
                ]
            }
        ),
        "a tableRef output is encoded as its Table says",
    ),
    Case(
        "app-output-table-with-delivery",
        app(
            {
                "outputs": [
                    {"tableRef": {"name": "counts"}, "keyColumns": ["w"], "delivery": "ExactlyOnce"}
                ]
            }
        ),
        "a tableRef output upserts by key",
    ),
    Case(
        "app-output-delivery-enum",
        app({"outputs": [app_output(delivery="exactly-once")]}),
        'spec.outputs[0].delivery: Unsupported value: "exactly-once"',
    ),
    Case(
        "app-output-string-key-of-two-columns",
        app({"outputs": [app_output(keyColumns=["a", "b"], keyFormat="string")]}),
        "keyFormat string or bytes holds one column",
    ),
    Case(
        "app-output-bytes-value-of-all-columns",
        app({"outputs": [app_output(valueFormat="bytes")]}),
        "valueFormat string or bytes holds one column",
    ),
    Case(
        "app-output-value-format-enum",
        app({"outputs": [app_output(valueFormat="thrift")]}),
        'spec.outputs[0].valueFormat: Unsupported value: "thrift"',
    ),
    Case(
        "app-output-key-protobuf-without-protobuf-key",
        app({"outputs": [app_output(keyColumns=["word"], keyProtobuf={"subject": "k"})]}),
        "keyProtobuf applies only to keyFormat protobuf",
    ),
    Case(
        "app-output-value-protobuf-for-avro",
        app({"outputs": [app_output(valueFormat="avro", valueProtobuf={"version": 2})]}),
        "valueProtobuf applies only to valueFormat protobuf",
    ),
    Case(
        "app-output-protobuf-schema-and-version",
        app(
            {
                "outputs": [
                    app_output(
                        valueFormat="protobuf",
                        valueProtobuf={"schema": PROTO, "message": "shop.Order", "version": 1},
                    )
                ]
            }
        ),
        "give the Protobuf schema inline (schema) or name a registered version (version)",
    ),
    Case(
        "app-output-protobuf-schema-without-message",
        app({"outputs": [app_output(valueFormat="protobuf", valueProtobuf={"schema": PROTO})]}),
        "an inline Protobuf schema needs the message read or written",
    ),
    Case(
        "app-output-protobuf-message-not-a-name",
        app(
            {
                "outputs": [
                    app_output(valueFormat="protobuf", valueProtobuf={"message": "shop/Order"})
                ]
            }
        ),
        "spec.outputs[0].valueProtobuf.message in body should match",
    ),
    Case(
        "app-output-key-avro-without-avro-key",
        app({"outputs": [app_output(keyColumns=["word"], keyAvro={"subject": "k"})]}),
        "keyAvro applies only to keyFormat avro",
    ),
    Case(
        "app-output-value-avro-for-json",
        app({"outputs": [app_output(valueFormat="json", valueAvro={"version": 2})]}),
        "valueAvro applies only to valueFormat avro",
    ),
    Case(
        "app-output-avro-schema-and-version",
        app(
            {
                "outputs": [
                    app_output(
                        valueFormat="avro", valueAvro={"schema": '{"type": "record"}', "version": 1}
                    )
                ]
            }
        ),
        "give the Avro schema inline (schema) or name a registered version (version), not both",
    ),
    Case(
        "app-output-avro-version-zero",
        app({"outputs": [app_output(valueFormat="avro", valueAvro={"version": 0})]}),
        "spec.outputs[0].valueAvro.version in body should be greater than or equal to 1",
    ),
    Case(
        "app-output-mode-enum",
        app({"outputs": [app_output(mode="merge")]}),
        'spec.outputs[0].mode: Unsupported value: "merge"',
    ),
    Case(
        "app-output-from-not-identifier",
        app({"outputs": [app_output(**{"from": "a b"})]}),
        "spec.outputs[0].from in body should match",
    ),
    # --- App: scaling and resources
    Case(
        "app-min-executors-above-max",
        app({"scaling": {"minExecutors": 5, "maxExecutors": 2}}),
        "scaling.minExecutors must not exceed scaling.maxExecutors",
    ),
    Case(
        "app-min-executors-above-default-max",
        app({"scaling": {"minExecutors": 9}}),
        "scaling.minExecutors must not exceed scaling.maxExecutors",
    ),
    Case(
        "app-max-executors-zero",
        app({"scaling": {"maxExecutors": 0}}),
        "spec.scaling.maxExecutors in body should be greater than or equal to 1",
    ),
    Case(
        "app-min-executors-negative",
        app({"scaling": {"minExecutors": -1}}),
        "spec.scaling.minExecutors in body should be greater than or equal to 0",
    ),
    Case(
        "app-lag-target-zero",
        app({"scaling": {"lagTarget": 0}}),
        "spec.scaling.lagTarget in body should be greater than or equal to 1",
    ),
    Case(
        "app-lag-target-past-int64",
        app({"scaling": {"lagTarget": 2**63}}),
        "spec.scaling.lagTarget",
    ),
    Case(
        "app-driver-cpu-past-int32",
        app({"driver": {"cpu": 2**31}}),
        "spec.driver.cpu in body should be less than or equal to 2147483647",
    ),
    Case(
        "app-executor-memory-past-int64",
        app({"executor": {"memory": 2**63}}),
        "spec.executor.memory",
    ),
    Case(
        "app-executor-memory-bytes-unit",
        app({"executor": {"memory": "2GB"}}),
        "spec.executor.memory in body should match",
    ),
    Case(
        "app-driver-memory-milli",
        app({"driver": {"memory": "512m"}}),
        "spec.driver.memory in body should match",
    ),
    Case(
        "app-driver-cpu-words",
        app({"driver": {"cpu": "two"}}),
        "spec.driver.cpu in body should match",
    ),
    Case("app-executor-cpu-float", app({"executor": {"cpu": 1.5}}), "spec.executor.cpu"),
    # --- App: checkpoint (S3A credentials and endpoint need an s3a:// location)
    Case(
        "app-checkpoint-secret-on-volume",
        app({"checkpoint": {"secretRef": {"name": "store"}}}),
        "checkpoint.secretRef and checkpoint.endpoint apply only to an s3a:// location: set "
        "checkpoint.location to s3a://<bucket>/<path>, or remove them",
    ),
    Case(
        "app-checkpoint-endpoint-on-gs",
        app({"checkpoint": {"location": "gs://bucket/app", "endpoint": "http://store:8333"}}),
        "checkpoint.secretRef and checkpoint.endpoint apply only to an s3a:// location",
    ),
    Case(
        "app-checkpoint-endpoint-not-a-url",
        app({"checkpoint": {"location": "s3a://bucket/app", "endpoint": "store:8333"}}),
        "spec.checkpoint.endpoint in body should match",
    ),
    # An App's own Secret must not be named as the Secrets Rillet makes for Apps end.
    *(
        Case(
            f"app-checkpoint-secret-named{suffix}",
            app(
                {
                    "checkpoint": {
                        "location": "s3a://bucket/app",
                        "secretRef": {"name": f"billing{suffix}"},
                    }
                }
            ),
            "a Secret an App names cannot end in -kafka, -spark-auth or -schema-registry: Rillet "
            "makes Secrets of those names for Apps",
        )
        for suffix in ("-kafka", "-spark-auth", "-schema-registry")
    ),
    Case(
        "app-checkpoint-secret-key-slash",
        app(
            {
                "checkpoint": {
                    "location": "s3a://bucket/app",
                    "secretRef": {"name": "store", "accessKeyIdKey": "a/b"},
                }
            }
        ),
        "spec.checkpoint.secretRef.accessKeyIdKey in body should match",
    ),
    # --- App: trigger, sparkConf, dead letters
    Case(
        "app-trigger-two-kinds",
        app({"trigger": {"processingTime": "10s", "availableNow": True}}),
        "trigger needs exactly one of processingTime, availableNow or realTime",
    ),
    Case(
        "app-trigger-empty",
        app({"trigger": {}}),
        "trigger needs exactly one of processingTime, availableNow or realTime",
    ),
    Case(
        "app-trigger-words",
        app({"trigger": {"processingTime": "10 seconds"}}),
        "spec.trigger.processingTime in body should match",
    ),
    Case(
        "app-trigger-available-now-false",
        app({"trigger": {"availableNow": False}}),
        "trigger.availableNow can only be true",
    ),
    Case(
        "app-spark-conf-master",
        app({"sparkConf": {"spark.master": "local[*]"}}),
        "sparkConf sets spark.master, which Rillet manages",
    ),
    Case(
        "app-spark-conf-dynamic-allocation",
        app(
            {
                "sparkConf": {
                    "spark.sql.shuffle.partitions": "8",
                    "spark.dynamicAllocation.enabled": "true",
                }
            }
        ),
        "sparkConf sets spark.dynamicAllocation.enabled, which Rillet manages",
    ),
    Case(
        "app-spark-conf-number",
        app({"sparkConf": {"spark.sql.shuffle.partitions": 8}}),
        "spec.sparkConf.spark.sql.shuffle.partitions",
    ),
    Case(
        "app-dead-letter-both",
        app({"deadLetterTopic": {"topicRef": {"name": "dlq"}, "topicName": "dlq"}}),
        "deadLetterTopic needs exactly one of topicRef or topicName",
    ),
    Case(
        "app-dead-letter-bad-ref-name",
        app({"deadLetterTopic": {"topicRef": {"name": "DLQ"}}}),
        "spec.deadLetterTopic.topicRef.name in body should match",
    ),
)
# The sparkConf of an App reaching past the App (issue 39): one row per group of keys.
CASES = (
    *CASES,
    *(
        Case(id_, app({"sparkConf": conf}), expect)
        for id_, conf, expect in invalid_spark_confs.refused()
    ),
)
