"""Table data: Apps with an invalid output, and what the apiserver says when it refuses them.
Part of the table invalid_crs.py joins.
"""

from __future__ import annotations

from tests.integration.invalid_cases import PROTO, Case, app, app_output

CASES: tuple[Case, ...] = (
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
)
