"""Table data: Apps with an invalid input or pipeline, and what the apiserver says when it
refuses them. Part of the table invalid_crs.py joins.
"""

from __future__ import annotations

from tests.integration.invalid_cases import DROP, PROTO, Case, app, app_input

CASES: tuple[Case, ...] = (
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
)
