"""The driver of one App: its Spark session and queries, started, reported and stopped.

`driving` wires the rest of the runtime together; `driverlock` keeps one driver per checkpoint,
`warmup` warms a standby up on the App's own plan, `checkpoints` refuses to start on a lost Table
checkpoint. The top of the runtime's layers: imported only by the runtime's commands and
`__main__` (and bench, tests and the local stack); it may import `queries`, `batches` and `jvm`,
not `pod`.
"""
