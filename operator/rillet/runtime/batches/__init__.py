"""A finished micro-batch: what it tells, and what the driver does with it after each one.

`progress` reads Spark's progress of a batch (pure), `listening` hands every batch to the
handlers, `committing` commits its offsets to the App's consumer group and `metrics` serves
them to Prometheus. Imported by `driver` and `pod` (and bench and tests); it imports nothing else
of the runtime.
"""
