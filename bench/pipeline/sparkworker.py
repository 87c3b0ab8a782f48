"""The Spark side of a benchmark, in a process of its own (`python -m bench.pipeline
spark-worker`): runs the App, the hand-written job or Spark's Kafka source once and prints
its figures as JSON; and `run_worker`, which spawns it and reads them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from bench.pipeline import feeding, manifests, settings

# The worker's command, run in the repository (its cwd): `bench` imports from there.
WORKER = (sys.executable, "-m", "bench.pipeline", "spark-worker")


def spark_worker(args: argparse.Namespace) -> None:
    """In a process of its own: run the App once, print its figures as JSON."""
    from rillet.driverapi import runspecs
    from rillet.reconcile import manifests as runmanifests
    from rillet.runtime.driver import driving, localspark
    from rillet.runtime.jvm import classsharing
    from rillet_devstack import spark as devspark

    if args.format:
        documents = manifests.formats_manifest(
            source=args.source, target=args.target, value_format=args.format
        )
    else:
        documents = manifests.app_manifest(
            source=args.source,
            target=args.target,
            stateless=args.stateless,
            delivery=args.delivery,
        )
    spec = runmanifests.build_run_spec_from_manifests(
        documents,
        bootstrap_servers=args.bootstrap,
        checkpoint_location=args.checkpoint,
        schema_registry=schema_registry(runspecs) if args.format in ("avro", "protobuf") else None,
    )
    catch_up = args.trigger == "available-now"
    trigger = runspecs.TriggerSpec(
        available_now=catch_up,
        processing_time_ms=settings.TRIGGER_MS if args.trigger == "processing-time" else None,
        real_time_ms=300_000 if args.trigger == "real-time" else None,
    )
    spec = spec.model_copy(
        update={
            "trigger": trigger,
            "shuffle_partitions": int(args.partitions),
            "max_offsets_per_trigger": (args.max_offsets or settings.MAX_OFFSETS)
            if catch_up
            else None,
        }
    )
    jars = [str(jar) for jar in devspark.spark_jars()]
    # The drivers' class archive as `rillet run` finds it: the one the environment names (a path
    # that names no file: none), else the local stack's.
    devspark.set_up_environment("run")
    options = driving.RunOptions(
        master=args.master,
        spark_conf=localspark.local_spark_conf(jars=jars, master=args.master),
        class_archive=classsharing.archive_path(),
    )
    spark = driving.build_session(spec, options)
    spark.range(1).collect()  # the JVM and executors are up before the clock starts
    if args.trigger == "source-count":
        print(json.dumps(count_source(spark, spec)), flush=True)
        spark.stop()
        return
    if args.hand:
        print(json.dumps(hand_written(spark, args)), flush=True)
        spark.stop()
        return
    batches: list[Any] = []
    driver = driving.Driver(spark, spec, on_batch=[batches.append])
    started = time.monotonic()
    driver.start()
    start_seconds = time.monotonic() - started
    if catch_up:
        driver.wait()
        seconds = time.monotonic() - started
        driver.stop()
        driver.close_catalog()  # its registry client's connections
        later = [b for b in batches if b.batch_id > 0 and b.input_rows]  # after the warm-up
        steady = sum(b.input_rows for b in later) / max(
            sum(b.duration_seconds for b in later), 1e-9
        )
        first = next((b.duration_seconds for b in batches if b.input_rows), 0.0)
        print(
            json.dumps(
                {"seconds": seconds, "steady": steady, "start": start_seconds, "first": first}
            ),
            flush=True,
        )
    else:
        print(json.dumps({"ready": True}), flush=True)
        sys.stdin.read()  # until the benchmark closes our stdin
        progresses = [json.loads(p.json) for q in driver.queries for p in q.recentProgress]
        print(json.dumps({"phases": batch_phases(progresses)}), flush=True)
        driver.stop(timeout=10)
    spark.stop()


def schema_registry(runspecs: Any) -> Any:
    """The registry of an Avro or Protobuf run, as `rillet run` takes it: the URL from the
    environment the benchmark gave the worker; the driver reads the credentials from it too."""
    return runspecs.SchemaRegistry(url=os.environ["RILLET_SCHEMA_REGISTRY_URL"])


# Where a micro-batch's time goes, from Spark's progress of each batch that read records:
# durationMs (Spark's own phases) and the state operators' timings. addBatch holds the tasks:
# reading Kafka, the aggregation, the state store's updates and commit, and the Kafka write.
PHASES = {
    "latestOffset": "latest offsets (Kafka's ends)",
    "walCommit": "offset log (write-ahead)",
    "queryPlanning": "planning",
    "addBatch": "tasks (read, aggregate, write)",
    "stateUpdates": "  of which state updates",
    "stateCommit": "  of which state commit",
    "commitOffsets": "commit log",
    "triggerExecution": "the whole batch",
}


def batch_phases(progresses: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Milliseconds per phase (PHASES) of each batch that read records."""
    phases: dict[str, list[float]] = {name: [] for name in PHASES}
    for progress in progresses:
        if not progress.get("numInputRows"):
            continue
        durations = progress.get("durationMs", {})
        operators = progress.get("stateOperators", [])
        durations = {
            **durations,
            "stateUpdates": sum(op.get("allUpdatesTimeMs", 0) for op in operators),
            "stateCommit": sum(op.get("commitTimeMs", 0) for op in operators),
        }
        for name in PHASES:
            phases[name].append(float(durations.get(name, 0)))
    return phases


def hand_written(spark: Any, args: argparse.Namespace) -> dict[str, float]:
    """(a-hand): the word count as one would write it in PySpark without Rillet, in the same
    session (so the same Spark settings): Kafka source, the App's SQL, Spark's Kafka writer in
    update mode, the same batch size and trigger. What (a) adds to it is Rillet's own cost."""
    from pyspark.sql import functions as f

    lines = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", settings.MAX_OFFSETS)
        .load()
    )
    lines.selectExpr("CAST(value AS STRING) AS value").createOrReplaceTempView("sentences")
    documents = yaml.safe_load_all((settings.REPO / "examples/wordcount.yaml").read_text())
    app = next(d for d in documents if d["kind"] == "App")
    counts = spark.sql(app["spec"]["pipeline"]["sql"])
    started = time.monotonic()
    query = (
        counts.select(
            f.col("word").alias("key"), f.to_json(f.struct("word", "count")).alias("value")
        )
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.target)
        .option("checkpointLocation", args.checkpoint)
        .outputMode("update")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seconds = time.monotonic() - started
    later = [p for p in query.recentProgress if p["batchId"] > 0 and p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in later)
    busy = sum(p["durationMs"]["triggerExecution"] for p in later) / 1000
    return {"seconds": seconds, "steady": rows / max(busy, 1e-9)}


def count_source(spark: Any, spec: Any) -> dict[str, float]:
    """Records/s of Spark's Kafka source alone: a batch count(*) of the input, cold then warm.

    The same consumer options as the App's streaming source; no decoding, no aggregation, no
    state, no writes: the most any Spark pipeline can read per task slot on this broker.
    """
    from rillet.runtime.queries import options

    item = spec.stream_inputs[0]
    reader_options = {
        key: value
        for key, value in options.stream_reader_options(spec, item).items()
        if key != "maxOffsetsPerTrigger"
    }
    frame = spark.read.format("kafka").options(**reader_options, endingOffsets="latest").load()
    rates = []
    for _ in range(2):
        started = time.monotonic()
        count = frame.count()
        rates.append(count / (time.monotonic() - started))
    return {"cold": rates[0], "warm": rates[1]}


def run_worker(bootstrap: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run the worker with `args` (and `env` added to ours), return the figures it printed."""
    command = [*WORKER, "--bootstrap", bootstrap, *args]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        cwd=settings.REPO,
        env={**os.environ, **(env or {})},
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"spark worker failed: {result.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(lines[-1])
    return figures


def count_words(
    bootstrap: str,
    source: str,
    master: str,
    workdir: Path,
    *args: str,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The word-count App over all of `source` into a fresh compacted Table topic, once
    (`args`: more worker options); the figures the worker printed."""
    table = feeding.create_topic(
        bootstrap,
        f"bench.counts.{uuid.uuid4().hex[:8]}",
        settings.PARTITIONS,
        **{"cleanup.policy": "compact"},
    )
    return run_worker(
        bootstrap,
        "--master",
        master,
        "--source",
        source,
        "--target",
        table,
        "--checkpoint",
        str(workdir / uuid.uuid4().hex),
        "--trigger",
        "available-now",
        "--partitions",
        str(settings.PARTITIONS),
        *args,
        env=env,
    )
