"""The driver of one App: start its queries, report their progress, stop them cleanly.

`Driver` wires the pieces: the inputs as views (`reading`), the pipeline (`pipelines`), one
query per output and per dead-letter stream (`writing`), the Avro and Protobuf schemas they are
planned with (`schemacatalog`: a query stopped by a schema id it did not know is planned again
once the registry was asked), and a listener that, after every batch, commits the processed
offsets to the App's consumer group (`committing`) and updates the Prometheus metrics
(`metrics`). `run` is the whole life of a driver process: session, start, wait until the
queries end, fail or a stop is asked for (SIGTERM, SIGINT), then stop each query at a batch
boundary.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from rillet.driverapi import runspecs
from rillet.reconcile import sparkdefaults
from rillet.runtime import jvm
from rillet.runtime.batches import committing, listening, metrics, progress
from rillet.runtime.driver import (
    checkpoints,
    driverlock,
    querystates,
    schemacatalog,
    signalstops,
    warmup,
)
from rillet.runtime.jvm import classsharing
from rillet.runtime.queries import (
    avrorecords,
    options,
    pipelines,
    protorecords,
    reading,
    records,
    writing,
)

log = logging.getLogger(__name__)

_POLL_SECONDS = 0.25


class QueryFailedError(RuntimeError):
    """A query of the App stopped with an error."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunOptions:
    """How and where a driver runs (not part of the App): Spark master, extra conf, metrics."""

    master: str | None = None
    spark_conf: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Whether spark_conf holds the run spec's Spark conf already: the driver pod's does, as the
    # operator built it (sparkdefaults.build_spark_conf); otherwise it is built here.
    run_conf_included: bool = False
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = None
    python_path: Sequence[str] = ()
    stop_timeout_seconds: float = 60.0
    class_archive: Path | None = None  # the driver JVM maps it (runtime.jvm.classsharing)
    checkpoint_endpoint: str | None = None  # the App's S3-compatible store, if it names one


def build_session(spec: runspecs.RunSpec, run_options: RunOptions) -> SparkSession:
    """The SparkSession of the App: its conf, plus the caller's (jars, master, UI...)."""
    builder = SparkSession.builder
    if run_options.master:
        builder = builder.master(run_options.master)
    if (run_options.master or "").startswith("local"):
        local_workers_run_this_python()
    conf = session_conf(spec, run_options)
    conf |= classsharing.java_options(conf, run_options.class_archive)
    conf |= jvm.jar_conf(conf)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def session_conf(spec: runspecs.RunSpec, run_options: RunOptions) -> dict[str, str]:
    """The run spec's Spark conf, then the caller's: built here only when the caller's does not
    hold it (a driver pod's holds it as the operator built it, which is not built twice)."""
    if run_options.run_conf_included:
        return dict(run_options.spark_conf)
    endpoint = run_options.checkpoint_endpoint
    run_conf = sparkdefaults.build_spark_conf(spec, checkpoint_endpoint=endpoint)
    return {**run_conf, **run_options.spark_conf}


def local_workers_run_this_python() -> None:
    """Local Python workers (UDFs, exactly-once writes) run this interpreter, with its packages
    (rillet's, pyarrow): pyspark takes PYSPARK_PYTHON, else `python3` on PATH. Call it before a
    process's first SparkContext, which fixes its workers' interpreter for good."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@dataclasses.dataclass(frozen=True)
class Plan:
    """The App's queries, built and checked, not started."""

    outputs: list[tuple[runspecs.OutputSpec, DataFrame]]
    bad_records: dict[str, DataFrame]
    avro: dict[str, records.AvroEncodings]  # by output id
    protobuf: dict[str, protorecords.ProtoEncodings]  # by output id

    def encodings(
        self, output: runspecs.OutputSpec
    ) -> tuple[records.AvroEncodings | None, protorecords.ProtoEncodings | None]:
        """An output's registered Avro and Protobuf schemas (None: it has none)."""
        return self.avro.get(output.id), self.protobuf.get(output.id)


class Driver:
    """The running queries of one App in a SparkSession."""

    def __init__(
        self,
        spark: SparkSession,
        spec: runspecs.RunSpec,
        *,
        app_metrics: metrics.Metrics | None = None,
        on_batch: Sequence[listening.BatchHandler] = (),
        stop: threading.Event | None = None,
    ) -> None:
        self.spark = spark
        self.spec = spec
        self.catalog = schemacatalog.SchemaCatalog.for_spec(spec, stop=stop)
        self.metrics = app_metrics or metrics.Metrics(app=spec.app, namespace=spec.namespace)
        self.started: list[writing.Started] = []
        self.committer: committing.OffsetCommitter | None = None
        self._extra_handlers = list(on_batch)
        self._listener: listening.ProgressListener | None = None
        self._handled: dict[str, int] = {}
        self._handled_changed = threading.Condition()

    def plan(self) -> Plan:
        """Build every DataFrame and check every output against its result, starting nothing
        (registering the outputs' Avro and Protobuf schemas)."""
        catalog = self.catalog
        readings = catalog.readings(self.spec) if catalog is not None else {}
        protobuf = catalog.proto_readings(self.spec) if catalog is not None else {}
        inputs = reading.read_inputs(self.spark, self.spec, readings, protobuf)
        results = pipelines.run_pipeline(self.spark, self.spec.pipeline, inputs.views)
        frames = [(output, results.get(output.result)) for output in self.spec.outputs]
        avro, encoded = {}, {}
        for output, frame in frames:
            if catalog is not None:
                avro[output.id] = catalog.encodings(output, frame.schema.jsonValue())
                encoded[output.id] = catalog.proto_encodings(output, frame.schema.jsonValue())
            protos = writing.proto_encoded(encoded.get(output.id))
            records.build_record_exprs(output, frame.columns, avro.get(output.id), protos)
        return Plan(outputs=frames, bad_records=inputs.bad_records, avro=avro, protobuf=encoded)

    def start(self) -> None:
        """Start every query of the App (nothing is started if the plan does not fit, or if a
        Table's checkpoint is lost: see `checkpoints`)."""
        self.spec = checkpoints.guard(self.spark, self.spec)
        plan = self.plan()
        frames, bad_records = plan.outputs, plan.bad_records
        names = [options.query_name(self.spec, output.id) for output, _ in frames] + [
            options.query_name(self.spec, writing.dead_letter_query_name(item))
            for item in self.spec.stream_inputs
            if item.name in bad_records
        ]
        self.committer = committing.OffsetCommitter(self.spec, queries=names)
        self._listener = listening.ProgressListener(
            [listening.only(set(names), handler) for handler in self._handlers()],
            expected=(writing.STOP_MARKER, avrorecords.UNKNOWN_ID_MARKER),
        )
        self.spark.streams.addListener(self._listener)
        try:
            for output, frame in frames:
                avro, protobuf = plan.encodings(output)
                self.started.append(writing.start_output(self.spec, output, frame, avro, protobuf))
            for item in self.spec.stream_inputs:
                if item.name in bad_records:
                    self.started.append(
                        writing.start_dead_letters(self.spec, item, bad_records[item.name])
                    )
        except Exception:
            self.stop()
            raise

    def _handlers(self) -> list[listening.BatchHandler]:
        committer, app_metrics = self.committer, self.metrics
        assert committer is not None

        def commit(batch: progress.BatchProgress) -> None:
            app_metrics.on_commit(committer.on_batch(batch))

        return [commit, app_metrics.on_batch, *self._extra_handlers, self._mark_handled]

    def _mark_handled(self, batch: progress.BatchProgress) -> None:
        with self._handled_changed:
            self._handled[batch.query] = max(batch.batch_id, self._handled.get(batch.query, -1))
            self._handled_changed.notify_all()

    def _drain_listener(self, *, timeout: float) -> None:
        """Wait until the listener has handled the last batch of every query (it lags behind)."""
        last = {str(q.name): querystates.last_batch(q) for q in self.queries}
        with self._handled_changed:
            self._handled_changed.wait_for(
                lambda: all(self._handled.get(name, -1) >= batch for name, batch in last.items()),
                timeout=timeout,
            )

    @property
    def queries(self) -> list[StreamingQuery]:
        """The App's running (or ended) queries."""
        return [started.query for started in self.started]

    def failure(self) -> str | None:
        """The error of the first failed query, if any (a refused batch while stopping is none)."""
        return querystates.first_failure(self.queries, ignored=writing.STOP_MARKER)

    def wait(self, stop: threading.Event | None = None) -> None:
        """Until every query has ended or `stop` is set; raises QueryFailedError on a failure
        (one over an Avro schema id the queries did not know restarts them: `replan`)."""
        while not (stop is not None and stop.is_set()):
            ended, failure = querystates.outcome(self.queries, ignored=writing.STOP_MARKER)
            if failure is not None:
                if not self.replan(failure):
                    raise QueryFailedError(failure)
            elif ended:
                return
            time.sleep(_POLL_SECONDS)

    def replan(self, failure: str) -> bool:
        """Plan and start the queries again when `failure` is a record of a schema id they did
        not know: the registry's answer for it is in the new plan. Whether it did."""
        ids = avrorecords.unknown_ids(failure)
        if not ids or self.catalog is None:
            return False
        log.info("records of schema ids the queries do not know (%s): asking the registry", ids)
        self.stop()
        self.catalog.learn(ids)
        self.start()
        return True

    def wait_until_reading(self, stop: threading.Event) -> None:
        """Until every query has fixed the offsets it starts from, or `stop` is set; raises
        QueryFailedError on a failure.

        Spark resolves a new query's `latest` on its first trigger, after start() returned:
        records written before then are skipped. So an App is not Ready (its metrics port
        closed) until then, and what is written once it is Ready is read.
        """
        while not (stop.is_set() or all(querystates.reading(q) for q in self.queries)):
            failure = self.failure()
            if failure is not None and not self.replan(failure):
                raise QueryFailedError(failure)
            time.sleep(_POLL_SECONDS)

    def stop(self, *, timeout: float = 60.0) -> None:
        """Stop every query at a batch boundary: what a batch wrote is committed, nothing more.

        Closing the gates first lets each query finish the batch it is writing and refuse the
        next; once that batch is committed (its progress reported) the query is stopped, or after
        `timeout`. Without a gate (real-time mode) the query is stopped at once.
        """
        deadline = time.monotonic() + timeout
        written = [s.gate.close() if s.gate is not None else None for s in self.started]
        for started, last_written in zip(self.started, written, strict=True):
            query = started.query
            while query.isActive and not querystates.at_boundary(query, last_written):
                if time.monotonic() > deadline:
                    log.warning("query %s still busy after %ss: stopping it", query.name, timeout)
                    break
                time.sleep(0.02)
            query.stop()
        self._drain_listener(timeout=10)
        self.close()
        self.started = []

    def close_catalog(self) -> None:
        """Release the schema registry's client, once the queries are stopped for good."""
        if self.catalog is not None:
            self.catalog.close()

    def close(self) -> None:
        """Release the listener and the committer (queries stopped or not)."""
        if self._listener is not None:
            self.spark.streams.removeListener(self._listener)
            self._listener = None
        if self.committer is not None:
            self.committer.close()  # its client: the removed listener stays referenced (py4j)
            self.committer = None


Alongside = Callable[[SparkSession], AbstractContextManager[object]]


def run(
    spec: runspecs.RunSpec,
    run_options: RunOptions,
    *,
    on_batch: Sequence[listening.BatchHandler] = (),
    alongside: Alongside | None = None,
) -> None:
    """A driver process: run the App until its queries end, one fails, or a signal stops it.

    `on_batch` handlers get each finished batch of the App's queries; `alongside`, given the
    session, is entered before the queries start and left before they are stopped (the
    in-cluster loop of a driver pod).
    """
    sys.path[:0] = [p for p in run_options.python_path if p not in sys.path]
    spark = build_session(spec, run_options)
    stop = threading.Event()
    driver = Driver(spark, spec, on_batch=on_batch, stop=stop)
    lock = None
    try:
        directory = driverlock.local_directory(spec.checkpoint_location)
        lock = None if directory is None else driverlock.DriverLock(spark, directory)
        with signalstops.stop_on_signals(stop):
            if lock is not None and not hold_checkpoint(lock, spark, spec, stop):
                return  # stopped while standing by: nothing was started
            with alongside(spark) if alongside is not None else nullcontext():
                _drive(driver, spec, run_options, stop)
    finally:
        try:
            driver.stop(timeout=run_options.stop_timeout_seconds)
            driver.close_catalog()
            driver.metrics.close()
            spark.stop()
        finally:
            # Last: until the session has stopped, its state stores may still write into the
            # checkpoint (maintenance), which the next driver must not see.
            if lock is not None:
                lock.close()


def hold_checkpoint(
    lock: driverlock.DriverLock, spark: SparkSession, spec: runspecs.RunSpec, stop: threading.Event
) -> bool:
    """Hold the App's checkpoint; whether it is held (not if `stop` was set first).

    A checkpoint held by another driver makes this one a warm standby: it warms up, then waits
    for the lock, and starts once the other driver's JVM is gone.
    """
    if lock.try_acquire():
        return True
    log.info(
        "the checkpoint %s is held by another driver (%s): standing by until it is free",
        spec.checkpoint_location,
        lock.holder() or "unknown",
    )
    warmup.warm_up(
        spark, spec, plan=outputs_planned, until=lambda: stop.is_set() or lock.try_acquire()
    )
    if not lock.acquire(stop):
        return False
    log.info("the checkpoint is free: taking over")
    return True


def outputs_planned(
    spark: SparkSession, spec: runspecs.RunSpec
) -> list[tuple[runspecs.OutputSpec, DataFrame, records.RecordExprs]]:
    """The App's outputs, their frames and record expressions, planned as its driver plans
    them (the warm-up's plan: encoding Avro and Protobuf as the App does)."""
    driver = Driver(spark, spec)
    try:
        plan = driver.plan()
        return [
            (output, frame, writing.record_exprs(output, frame, *plan.encodings(output)))
            for output, frame in plan.outputs
        ]
    finally:
        driver.close_catalog()


def _drive(
    driver: Driver, spec: runspecs.RunSpec, run_options: RunOptions, stop: threading.Event
) -> None:
    """Start the App's queries and run them until they end, one fails, or `stop` is set."""
    driver.start()
    driver.wait_until_reading(stop)
    # Served once the queries read: a driver pod is Ready when its metrics port answers,
    # so a driver that refuses to start (a lost checkpoint) is never Ready, even briefly.
    if run_options.metrics_port is not None:
        port = driver.metrics.serve(host=run_options.metrics_host, port=run_options.metrics_port)
        log.info("metrics on http://%s:%s/metrics", run_options.metrics_host, port)
    log.info("App %s.%s running %d queries", spec.namespace, spec.app, len(driver.queries))
    driver.wait(stop)
