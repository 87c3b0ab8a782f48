"""Option dicts for Spark's Kafka source and sink, triggers and output modes (pure).

Each function turns the resolved run spec into the plain values one Spark call takes, so the
effectful code in `reading` and `writing` is a thin sequence of calls.
"""

from __future__ import annotations

from typing import Any, Literal

from rillet.driverapi import runspecs
from rillet.runtime.queries import kafkalogin


def kafka_client_options(spec: runspecs.RunSpec) -> dict[str, str]:
    """Connection settings of Spark's Kafka source and sink (prefixed `kafka.`, Java names)."""
    java = kafkalogin.java_client_config(spec.kafka_config)
    return {
        "kafka.bootstrap.servers": spec.bootstrap_servers,
        **{f"kafka.{key}": value for key, value in java.items()},
    }


# Consumer settings of the streaming source, before the App's own kafkaConfig (which wins).
SOURCE_CONSUMER_DEFAULTS = {
    # A task only fetches offset ranges the broker already has, so the broker should never hold
    # a fetch back: with the default fetch.max.wait.ms (500 ms) a consumer's leftover prefetch
    # at the end of the previous range stalled tasks of small batches by half a second.
    "kafka.fetch.max.wait.ms": "10",
    # Fewer, larger fetches and polls: catching up went from ~150k to ~180k records/s per core
    # (word count, bench/pipeline/) over the defaults (1 MiB per partition, 500 records).
    "kafka.max.partition.fetch.bytes": str(8 << 20),
    "kafka.max.poll.records": "10000",
}


def stream_reader_options(spec: runspecs.RunSpec, item: runspecs.InputSpec) -> dict[str, str]:
    """Options of the streaming Kafka source of a topic input.

    startingOffsets only applies to a new checkpoint; afterwards Spark resumes from its offsets.
    """
    options = {
        **SOURCE_CONSUMER_DEFAULTS,
        **kafka_client_options(spec),
        "subscribe": item.topic,
        "startingOffsets": item.starting_offsets,
        # Spark names its consumer groups `<prefix>-<uuid>-<n>`: under the App's own group
        # name, which is what the App's Kafka principal may use (reconcile.kafkaaccess).
        "groupIdPrefix": f"{spec.consumer_group}.spark",
    }
    # `rillet run --max-offsets-per-trigger` overrides every input's own, as other flags do.
    limit = spec.max_offsets_per_trigger or item.max_offsets_per_trigger
    if limit is not None:
        options["maxOffsetsPerTrigger"] = str(limit)
    return options


def table_reader_options(spec: runspecs.RunSpec, item: runspecs.InputSpec) -> dict[str, str]:
    """Options of the batch Kafka read of a Table's changelog (all of it, up to now)."""
    return {
        **kafka_client_options(spec),
        "subscribe": item.topic,
        "startingOffsets": "earliest",
        "endingOffsets": "latest",
    }


def writer_options(spec: runspecs.RunSpec, *, topic: str) -> dict[str, str]:
    """Options of Spark's Kafka writer (sink or batch write) to `topic` (at-least-once)."""
    return {**kafka_client_options(spec), "topic": topic}


def trigger_kwargs(trigger: runspecs.TriggerSpec) -> dict[str, Any]:
    """Keyword arguments of DataStreamWriter.trigger; empty for back-to-back micro-batches."""
    if trigger.available_now:
        return {"availableNow": True}
    if trigger.real_time_ms is not None:
        return {"realTime": f"{trigger.real_time_ms} milliseconds"}
    if trigger.processing_time_ms is not None:
        return {"processingTime": f"{trigger.processing_time_ms} milliseconds"}
    return {}


def output_mode(
    output: runspecs.OutputSpec | None, trigger: runspecs.TriggerSpec
) -> Literal["append", "update"]:
    """Spark's output mode: upsert outputs emit each batch's changed rows (update).

    `None` is the dead-letter stream (append). Real-time mode accepts only update, which for the
    stateless queries it runs means the same as append.
    """
    if trigger.real_time_ms is not None or (output is not None and output.mode == "upsert"):
        return "update"
    return "append"


def query_name(spec: runspecs.RunSpec, name: str) -> str:
    """Name of a streaming query of the App (unique within the driver)."""
    return f"{spec.app}.{name}"
