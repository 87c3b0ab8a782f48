"""The driver of one App: its Spark session and queries, started, reported and stopped.

`driving` wires the rest of the runtime together; `driverlock` keeps one driver per checkpoint,
`warmup` warms a standby up on the App's own plan, `checkpoints` refuses to start on a lost Table
checkpoint, `schemacatalog` (Avro) and `protocatalog` (Protobuf) hold the schemas the queries are
planned with, asked of the registry through `registryasking`; `signalstops` ends the running
batch on SIGTERM. The top of the runtime's layers:
imported only by the runtime's commands and `__main__` (and bench, tests and the local stack);
it may import `queries`, `batches` and `jvm`, not `pod`.
"""
