"""Starting the App's streaming queries: one per output, one per json, avro or protobuf input
with dead letters.

Records reach Kafka through Spark's Kafka writer, which is at-least-once: a batch interrupted
after some of its records were sent runs again from the checkpoint, and sends them again.
Outputs (and dead letters) with delivery ExactlyOnce are written in Kafka transactions instead
(`transactions`): once, for read_committed consumers.
- Topic outputs append each result row as a record (upsert mode: each batch's changed rows).
- Table outputs upsert: each batch sends the changed rows of its keys (Spark's update mode), so
  the compacted changelog keeps the latest value per key. A re-run batch sends the same values
  again: the Table ends up the same (idempotent), only extra records reach the changelog until
  compaction. Within a key, records keep the order of the input partition they came from.
- Rows without any key column cannot live in a compacted topic: Table outputs leave them out and
  count them (metric `rillet_observed_rows{metric="<output>_without_key.rows"}`).
- Bad records of a json, avro or protobuf input go, untouched, to the dead-letter topic, with
  the reason and their source coordinates in headers (`records.dead_letter_exprs`).
Each query has its own checkpoint directory under the App's checkpoint location.

Stopping at a batch boundary: in micro-batch mode every query writes through `foreachBatch`
behind a `BatchGate`. Closing the gate waits for the batch being written, and refuses the next
one before it writes anything; the driver then waits for the written batch to be committed and
stops the query. So a SIGTERM never leaves half a batch in Kafka (no duplicates on restart).
Real-time mode has no foreachBatch: there the Kafka sink writes directly and a stop is best
effort (at-least-once still holds).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.streaming.query import StreamingQuery

from rillet.driverapi import runspecs
from rillet.runtime.queries import (
    avrorecords,
    options,
    pinning,
    protorecords,
    protostages,
    records,
    transactions,
)

STOP_MARKER = "rillet: stopping at a batch boundary"


class StopRequestedError(RuntimeError):
    """Raised in a batch that starts after its query's gate closed: it writes nothing."""


class BatchGate:
    """Lets one batch of a query write at a time; once closed, lets none through."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self.last_written = -1

    def write(self, batch_id: int, action: Callable[[], object]) -> None:
        """Run `action` (the batch's writes) unless the gate is closed."""
        with self._lock:
            if self._closed:
                raise StopRequestedError(f"{STOP_MARKER}: batch {batch_id} not written")
            action()
            self.last_written = batch_id

    def close(self) -> int:
        """Refuse further batches; returns, once no batch is writing, the last one written."""
        with self._lock:
            self._closed = True
            return self.last_written


@dataclasses.dataclass(frozen=True)
class Started:
    """A running query, and its gate (None in real-time mode)."""

    query: StreamingQuery
    gate: BatchGate | None


def dead_letter_query_name(item: runspecs.InputSpec) -> str:
    """Name (within the App) of the query routing an input's bad records."""
    return f"dead-letters-{item.name}"


def _observe(frame: DataFrame, spec: runspecs.RunSpec, name: str, condition: str) -> DataFrame:
    """Count rows matching `condition` into the batch's observed metrics (micro-batches only)."""
    if spec.trigger.real_time_ms is not None:
        return frame
    counted = F.sum(F.expr(f"CASE WHEN {condition} THEN 1 ELSE 0 END")).alias("rows")
    return frame.observe(name, counted)


def start_output(
    spec: runspecs.RunSpec,
    output: runspecs.OutputSpec,
    frame: DataFrame,
    avro: records.AvroEncodings | None = None,
    protobuf: protorecords.ProtoEncodings | None = None,
) -> Started:
    """Start the query writing `frame` (a result of the pipeline) to `output` (`avro`,
    `protobuf`: its registered schemas, for an avro or protobuf key or value)."""
    exprs = record_exprs(output, frame, avro, protobuf)
    rows = frame
    if output.kind == "table" and exprs.key_columns:
        has_key = records.has_key_expr(exprs.key_columns)
        name = f"{output.id.replace('-', '_')}_without_key"
        rows = _observe(rows, spec, name, f"NOT ({has_key})").where(has_key)
    return _start(
        rows.selectExpr(*exprs.select()),
        spec,
        name=options.query_name(spec, output.id),
        topic=output.topic,
        checkpoint=runspecs.output_checkpoint(spec, output),
        mode=options.output_mode(output, spec.trigger),
        exactly_once=output.exactly_once,
    )


def record_exprs(
    output: runspecs.OutputSpec,
    frame: DataFrame,
    avro: records.AvroEncodings | None = None,
    protobuf: protorecords.ProtoEncodings | None = None,
) -> records.RecordExprs:
    """The key and value expressions `output` writes of `frame`, its Protobuf encoders
    registered in the frame's session (the expressions call them by name)."""
    protobuf = protobuf or protorecords.ProtoEncodings()
    protostages.register_encoders(frame.sparkSession, output, protobuf)
    return records.build_record_exprs(
        output, frame.columns, avro or records.AvroEncodings(), proto_encoded(protobuf)
    )


def proto_encoded(encodings: protorecords.ProtoEncodings | None) -> records.ProtoEncoded:
    """Which parts of an output have Protobuf encoders (the names its expressions call)."""
    if encodings is None:
        return records.ProtoEncoded()
    return records.ProtoEncoded(key=encodings.key is not None, value=encodings.value is not None)


def start_dead_letters(
    spec: runspecs.RunSpec, item: runspecs.InputSpec, bad_records: DataFrame
) -> Started:
    """Start the query sending an input's bad records to the App's dead-letter topic."""
    assert spec.dead_letter_topic is not None
    if item.format == "avro":
        reason = avrorecords.reason_expr()
    elif item.format == "protobuf":
        reason = protostages.reason_expr()
    else:
        assert item.value_schema is not None  # json: runparts requires a schema
        reason = records.reason_expr(item.value_schema)
    name = dead_letter_query_name(item)
    counted = _observe(bad_records, spec, name.replace("-", "_"), "TRUE")
    return _start(
        counted.selectExpr(*records.dead_letter_exprs(app=spec.app, reason=reason)),
        spec,
        name=options.query_name(spec, name),
        topic=spec.dead_letter_topic,
        checkpoint=runspecs.dead_letter_checkpoint(spec, item),
        mode=options.output_mode(None, spec.trigger),
        exactly_once=spec.dead_letter_exactly_once,
    )


def _start(
    frame: DataFrame,
    spec: runspecs.RunSpec,
    *,
    name: str,
    topic: str,
    checkpoint: str,
    mode: str,
    exactly_once: bool = False,
) -> Started:
    writer = frame.writeStream.outputMode(mode).queryName(name)
    writer = writer.option("checkpointLocation", checkpoint)
    trigger = options.trigger_kwargs(spec.trigger)
    if trigger:
        writer = writer.trigger(**trigger)
    sink = options.writer_options(spec, topic=topic)
    if spec.trigger.real_time_ms is not None:
        return Started(writer.format("kafka").options(**sink).start(), None)
    gate = BatchGate()
    pins = _lookup_pins(spec, name)
    if exactly_once:
        # The query's name within the App (after `<app>.`) names its transactions.
        transactional = transactions.TransactionalSink(
            config={
                key.removeprefix("kafka."): value
                for key, value in options.kafka_client_options(spec).items()
            },
            topic=topic,
            prefix=f"{spec.consumer_group}.{name.removeprefix(f'{spec.app}.')}",
            partitions=spec.shuffle_partitions,
        )
        return Started(
            writer.foreachBatch(_transactional_writer(gate, transactional, pins)).start(), gate
        )
    return Started(writer.foreachBatch(_batch_writer(gate, sink, pins)).start(), gate)


def _lookup_pins(spec: runspecs.RunSpec, name: str) -> pinning.LookupPins | None:
    """The pins of a query's batches, when the App looks Tables up (pinning.py)."""
    tables = {i.name: i.topic for i in spec.inputs if i.kind == "table"}
    looked_up = [tables[lookup.table] for i in spec.inputs for lookup in i.lookups]
    if not looked_up:
        return None
    return pinning.LookupPins(
        config={**spec.kafka_config, "bootstrap.servers": spec.bootstrap_servers},
        group=f"{spec.consumer_group}.{name.removeprefix(f'{spec.app}.')}.lookups",
        topics=looked_up,
    )


def _pinned(
    batch: DataFrame, batch_id: int, pins: pinning.LookupPins | None, write: Callable[[], object]
) -> None:
    """Run the batch's writes with its lookups pinned: the jobs they start carry the pins."""
    if pins is None:
        write()
        return
    context = batch.sparkSession.sparkContext
    query_id = context.getLocalProperty(pinning.QUERY_ID_PROPERTY)
    if not query_id:
        raise RuntimeError("foreachBatch ran without its query's id: cannot pin lookups")
    pinned = pins.pin(query_id, batch_id)
    context.setLocalProperty(pinning.PINS_PROPERTY, pinning.encode(pins.group, pinned))
    try:
        write()
    finally:
        context.setLocalProperty(pinning.PINS_PROPERTY, None)  # type: ignore[arg-type]


def _batch_writer(
    gate: BatchGate, sink: Mapping[str, str], pins: pinning.LookupPins | None
) -> Callable[[DataFrame, int], None]:
    def write(batch: DataFrame, batch_id: int) -> None:
        def save() -> None:
            batch.write.format("kafka").options(**sink).save()

        gate.write(batch_id, functools.partial(_pinned, batch, batch_id, pins, save))

    return write


def _transactional_writer(
    gate: BatchGate, sink: transactions.TransactionalSink, pins: pinning.LookupPins | None
) -> Callable[[DataFrame, int], None]:
    def write(batch: DataFrame, batch_id: int) -> None:
        save = functools.partial(transactions.write_batch, sink, batch, batch_id)
        gate.write(batch_id, functools.partial(_pinned, batch, batch_id, pins, save))

    return write
