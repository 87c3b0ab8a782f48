"""The App's streaming queries: its inputs read, its pipeline run, its outputs written.

`reading` makes the inputs views (`records` decodes them), `pipelines` runs the App's SQL
(`statements`) or Python, `lookups` joins a Table's latest values at offsets `pinning` keeps,
`writing` starts one query per output, exactly once through `transactions`; `options` and
`kafkalogin` give Spark's Kafka source and sink their options and login. `avrorecords` and
`avroschemas` read and write Avro in Confluent's wire format; the `proto*` modules do the same
for Protobuf in Python workers (`protorecords` per record, `protostages` the arrow UDFs that
`reading` and `writing` put in the queries).
Imported by `driver` and the runtime's commands (and bench and tests); it may import `jvm` and
`tables`, not `driver`, `pod` or `batches`.
"""
