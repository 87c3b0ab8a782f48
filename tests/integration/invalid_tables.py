"""Table data: invalid Tables (partitions, formats, serving, windows, updates), and what the
apiserver says when it refuses them. Part of the table invalid_crs.py joins.
"""

from __future__ import annotations

from tests.integration.invalid_cases import DROP, WINDOW, Case, merged, table

CASES: tuple[Case, ...] = (
    # --- Table: Kafka topic names
    Case("table-name-internal", table({"topicName": "_counts"}), "cannot start with '_'"),
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
)
