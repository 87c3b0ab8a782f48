"""The driver's check, before it starts anything, that no Table output's checkpoint is lost.

It gathers the facts and lets `reconcile.checkpointloss` decide:
- whether each Table output's checkpoint holds offsets, through Hadoop's FileSystem (which reads
  the volume's paths and s3a://, hdfs://... alike, with the session's credentials);
- whether the Table's topic holds records, and (for Recompute) what the inputs still hold of
  their past: first offsets and cleanup.policy, from Kafka.
A refusal raises `CheckpointLostError`; the driver ends with `CheckpointLostError: ...` as
its termination message, which the operator turns into the App's Stalled condition.

Recompute sets startingOffsets to earliest for every topic input, and the inputs are shared by
the App's queries: a Topic output or dead-letter query whose checkpoint was lost with the
Table's (the same volume) reads the whole history again too, and writes its records again.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from rillet.driverapi import runspecs
from rillet.reconcile import checkpointloss
from rillet.tables import watermarks

if TYPE_CHECKING:  # pyspark only at run time, from inside a running driver
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

TIMEOUT_SECONDS = 30.0


CheckpointLostError = checkpointloss.CheckpointLostError


def guard(spark: SparkSession, spec: runspecs.RunSpec) -> runspecs.RunSpec:
    """The spec to start (inputs from their earliest offsets when recomputing).

    Raises CheckpointLostError when checkpoint.onLoss says not to start.
    """
    lost = lost_tables(spark, spec)
    if not lost:
        return spec
    histories = input_histories(spec) if spec.checkpoint_on_loss == "Recompute" else []
    decision = checkpointloss.decide(spec.checkpoint_on_loss, lost, histories)
    if not decision.start:
        raise CheckpointLostError(decision.problem)
    log.warning(
        "%s; checkpoint.onLoss is %s: starting %s",
        checkpointloss.describe(lost),
        spec.checkpoint_on_loss,
        "from the inputs' earliest offsets" if decision.from_earliest else "from startingOffsets",
    )
    if not decision.from_earliest:
        return spec
    inputs = tuple(
        i.model_copy(update={"starting_offsets": "earliest"}) if i.kind == "topic" else i
        for i in spec.inputs
    )
    return spec.model_copy(update={"inputs": inputs})


def lost_tables(spark: SparkSession, spec: runspecs.RunSpec) -> list[checkpointloss.LostTable]:
    """The Table outputs whose checkpoint holds no offsets while their topic holds records."""
    fresh = [
        (output, checkpoint)
        for output in spec.outputs
        if output.kind == "table"
        and not has_offsets(spark, checkpoint := runspecs.output_checkpoint(spec, output))
    ]
    if not fresh:
        return []
    lost = []
    with _watermark_reader(spec) as consumer:
        for output, checkpoint in fresh:
            # Any offset between the watermarks: a tombstone counts too (a deleted key was data).
            # A topic not made yet holds nothing to lose (Spark's writer will report it).
            try:
                watermarks = _watermarks(consumer, output.topic)
            except LookupError:
                continue
            if any(high > low for low, high in watermarks.values()):
                lost.append(
                    checkpointloss.LostTable(
                        output_id=output.id, topic=output.topic, checkpoint=checkpoint
                    )
                )
    return lost


def has_offsets(spark: SparkSession, directory: str) -> bool:
    """Whether a query's checkpoint directory holds the offsets of at least one batch."""
    context = spark.sparkContext
    jvm = context._jvm  # Hadoop's FileSystem: only reachable through py4j
    assert jvm is not None
    offsets = jvm.org.apache.hadoop.fs.Path(f"{directory.rstrip('/')}/offsets")
    filesystem = offsets.getFileSystem(context._jsc.hadoopConfiguration())
    if not filesystem.exists(offsets):
        return False
    # Spark names a batch's offset file by its batch id; .crc and temporary files do not count.
    return any(str(s.getPath().getName()).isdigit() for s in filesystem.listStatus(offsets))


def input_histories(spec: runspecs.RunSpec) -> list[checkpointloss.InputHistory]:
    """What each stream input topic still holds of its past."""
    topics = sorted({i.topic for i in spec.stream_inputs})
    admin = AdminClient({**spec.kafka_config, "bootstrap.servers": spec.bootstrap_servers})
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
    policies = {
        resource.name: future.result(timeout=TIMEOUT_SECONDS)["cleanup.policy"].value or ""
        for resource, future in admin.describe_configs(resources).items()
    }
    with _watermark_reader(spec) as consumer:
        return [
            checkpointloss.InputHistory(
                topic=topic,
                compacted="compact" in policies[topic],
                first_offsets={p: low for p, (low, _) in _watermarks(consumer, topic).items()},
            )
            for topic in topics
        ]


@contextlib.contextmanager
def _watermark_reader(spec: runspecs.RunSpec) -> Iterator[Consumer]:
    """A consumer that joins no group (it only reads watermarks), closed on exit."""
    consumer = Consumer(
        {
            **spec.kafka_config,
            "bootstrap.servers": spec.bootstrap_servers,
            "group.id": f"rillet.checkpoint-check.{uuid.uuid4().hex}",  # never joined
            "enable.auto.commit": False,
        }
    )
    try:
        yield consumer
    finally:
        consumer.close()


def _watermarks(consumer: Consumer, topic: str) -> Mapping[int, tuple[int, int]]:
    """Low and high watermark of each partition of `topic`."""
    metadata = consumer.list_topics(topic, timeout=TIMEOUT_SECONDS).topics.get(topic)
    if metadata is None or metadata.error is not None:
        raise LookupError(f"topic {topic} not found")
    return {
        partition: watermarks.watermarks(consumer, topic, partition, timeout=TIMEOUT_SECONDS)
        for partition in metadata.partitions
    }
