"""Exactly-once Topic outputs: each micro-batch reaches Kafka once, in Kafka transactions.

Spark's Kafka sink is at-least-once: a batch cut off by a failure runs again from the
checkpoint and sends its records again. Here a batch (`foreachBatch`, id b) is split into write
units, and each unit p is written by one task in one Kafka transaction of its own:

- the producer's `transactional.id` is `<group>.<query>.<p>`: starting it (initTransactions)
  fences any older producer of that id (a task of a killed or paused driver, a lost executor's)
  and settles the transaction it left open;
- the transaction carries a marker besides the records: offset b+1 of (output topic, partition
  0) committed for the group `<group>.<query>.done.<p>` through sendOffsetsToTransaction. It
  becomes visible exactly when the records do;
- before writing, the task reads its marker (a read_committed consumer waits for pending
  transactional offsets): at b+1 or more, unit p of batch b is in Kafka already and is skipped.

A replayed batch reads the offsets Spark logged for it through the same plan, so it holds the
same records, and each unit must hold the same ones as the first time. Where the batch's
partitions are still the Kafka source's (a stateless query: filters, projections, lookups), a
unit is the Kafka partition its task read, `<topic>-<partition>`: no shuffle. Otherwise (a
stateful query, a union) the records are hashed by key and value into `partitions` units. (A
partition's index will not do: the order of a Kafka source's partitions changes from one driver
to the next.) Both names sit under the App's own prefix `<group>.`, which its Kafka principal is
allowed (reconcile.kafkaaccess).

The tasks run `rillet.spark.TransactionalWriter` (jvm/TransactionalWriter.java, whose jar
`spark.jars` names: the runtime image's and the local stack's): the records go from Spark's
rows to Kafka's Java producer without leaving the JVM. Handing them to Python workers and
confluent-kafka, as this module first did, halved the throughput (docs/runtime.md).
"""

from __future__ import annotations

import dataclasses

from py4j.java_gateway import JavaClass
from pyspark.sql import DataFrame

from rillet.runtime.jvm import JAR, WRITER_CLASS


@dataclasses.dataclass(frozen=True)
class TransactionalSink:
    """Where one query writes: the topic, the client settings, the names of its transactions."""

    # Kafka's Java client settings: bootstrap servers and login (a password: never in a repr)
    config: dict[str, str] = dataclasses.field(repr=False)
    topic: str
    prefix: str  # <consumer group>.<query id>
    partitions: int  # hashed write units, where a unit cannot be a Kafka partition

    @property
    def transactional_id_prefix(self) -> str:
        return f"{self.prefix}."

    @property
    def marker_group_prefix(self) -> str:
        return f"{self.prefix}.done."

    def transactional_id(self, unit: int | str) -> str:
        """Unit `unit`'s: a hash's number, or `<topic>-<partition>`."""
        return f"{self.transactional_id_prefix}{unit}"

    def marker_group(self, unit: int | str) -> str:
        return f"{self.marker_group_prefix}{unit}"


class WriterMissingError(RuntimeError):
    """The JVM has no exactly-once writer: its jar is not among `spark.jars`."""


def write_batch(sink: TransactionalSink, batch: DataFrame, batch_id: int) -> int:
    """Write the batch's records (columns value, and key and headers if any) once; the count
    written now (0 for the units written before)."""
    jvm = batch.sparkSession._jvm  # py4j's view of the driver
    assert jvm is not None  # a classic (not Spark Connect) session
    writer = jvm.rillet.spark.TransactionalWriter
    if not isinstance(writer, JavaClass):  # py4j's name for a class it did not find
        raise WriterMissingError(
            f"exactly-once delivery needs {JAR} in spark.jars (the runtime image and "
            f"`rillet dev up` provide it): no class {WRITER_CLASS}"
        )
    return int(
        writer.write(
            batch._jdf,
            batch_id,
            sink.config,
            sink.topic,
            sink.transactional_id_prefix,
            sink.marker_group_prefix,
            sink.partitions,
        )
    )
