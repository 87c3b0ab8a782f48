"""A standby driver's warm-up: the App's own plan, run once into Spark's noop sink.

A driver's first batch is slow in a new JVM: the JIT, Spark's code generation, the Kafka
consumers' set-up (8 s here for a word count, against 1 s for the same batch in a JVM that
ran it before). A driver that finds its checkpoint held by another (`runtime.driver.driverlock`)
stands by: it pays that cost while it waits, so that it takes over warm.

The warm-up runs every output's plan on at most WARM_UP_RECORDS of each input's first records
into the noop sink, under a scratch checkpoint, in a session of its own. It writes nothing:
no Kafka record, no offset commit, and the App's checkpoint is not touched. It is best effort:
a warm-up that fails or finds no record only leaves the driver as cold as a driver without
one. An App that looks Tables up is not warmed (see `warm_up`).
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
from collections.abc import Callable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from rillet.driverapi import runspecs
from rillet.runtime.queries import options, records

log = logging.getLogger(__name__)

WARM_UP_RECORDS = 1_000  # a batch's worth of code paths, not of work
# The first batch runs at once; the second would wait this long, so the warm-up stops between
# batches and cuts none (a query stopped mid-batch logs broadcast and job-cancel errors).
ONE_BATCH_MS = 3_600_000
TIMEOUT_SECONDS = 60.0
_POLL_SECONDS = 0.1

# The App's outputs, the frame each writes and its record expressions (Avro and Protobuf
# encoders included), as its driver plans them (driving.outputs_planned).
Plan = Callable[
    [SparkSession, runspecs.RunSpec],
    Sequence[tuple[runspecs.OutputSpec, DataFrame, records.RecordExprs]],
]


def warm_spec(spec: runspecs.RunSpec, scratch: str) -> runspecs.RunSpec:
    """The App as the warm-up runs it: one micro-batch of its inputs' first records, under the
    `scratch` checkpoint."""
    inputs = tuple(
        item.model_copy(update={"starting_offsets": "earliest"}) if item.kind == "topic" else item
        for item in spec.inputs
    )
    return spec.model_copy(
        update={
            "checkpoint_location": scratch,
            "inputs": inputs,
            "max_offsets_per_trigger": WARM_UP_RECORDS,  # overrides each input's own
            "trigger": runspecs.TriggerSpec(processing_time_ms=ONE_BATCH_MS),
        }
    )


def warm_up(
    spark: SparkSession, spec: runspecs.RunSpec, *, plan: Plan, until: Callable[[], bool]
) -> None:
    """Run the App's `plan` once into the noop sink; end early once `until()` holds.

    In a session of its own: the pipeline's temporary views, SQL settings and listeners stay
    apart from the App's, whose pipeline then runs as in a new driver (a plain `CREATE
    TEMPORARY VIEW` would otherwise find its view already there). The JVM, its compiled code
    and the Python workers are shared: they are what is warmed.
    """
    if any(item.lookups for item in spec.inputs):
        # Unpinned, a lookup copies the whole Table into each worker for nothing: the App's
        # pinned batches read replicas of their own (runtime.queries.lookups).
        log.info("no warm-up: the App looks Tables up")
        return
    started = time.monotonic()
    queries: list[StreamingQuery] = []
    with tempfile.TemporaryDirectory(
        prefix="rillet-warm-up-", ignore_cleanup_errors=True
    ) as scratch:
        try:
            _start(spark.newSession(), warm_spec(spec, scratch), plan, queries)
            done = _wait(queries, until=until, deadline=started + TIMEOUT_SECONDS)
        except Exception as error:  # a cold takeover is still a takeover
            log.warning("the warm-up failed (the driver will start cold): %s", error)
            return
        finally:
            for query in queries:
                with contextlib.suppress(Exception):  # stopping is all that is left to do
                    query.stop()
    took = time.monotonic() - started
    if done:
        log.info("warmed up in %.1f s", took)
    else:
        log.info("the warm-up ended unfinished after %.1f s", took)


def _start(
    spark: SparkSession, spec: runspecs.RunSpec, plan: Plan, queries: list[StreamingQuery]
) -> None:
    """Start one noop query per output of the App's plan, into `queries` (the caller stops
    them, also those started before a failure)."""
    for output, frame, exprs in plan(spark, spec):
        writer = frame.selectExpr(*exprs.select()).writeStream.format("noop")
        writer = writer.outputMode(options.output_mode(output, spec.trigger))
        writer = writer.trigger(**options.trigger_kwargs(spec.trigger))
        queries.append(
            writer.option("checkpointLocation", runspecs.output_checkpoint(spec, output)).start()
        )


def _wait(queries: list[StreamingQuery], *, until: Callable[[], bool], deadline: float) -> bool:
    """Until each query reported a trigger (its batch ran, or it found no record) or ended
    (True), or `until()` holds or the deadline passed (False)."""
    while not until() and time.monotonic() < deadline:
        if all(query.lastProgress is not None or not query.isActive for query in queries):
            return True
        time.sleep(_POLL_SECONDS)
    return False
