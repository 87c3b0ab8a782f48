"""How often, and how fast, a topic input's values are decoded: no stack, one local Spark.

    .venv/bin/python -m bench.decoding [--rows 200000] [--repeats 3]

The parsing stages of a json and an avro input (reading.parse_records) over a cached batch of
Kafka-shaped rows (key, value, topic, partition, offset, timestamp), every value good, on
Spark local[1]: for each format, with a dead-letter topic (the view, and the bad records'
query) and without (the view, which stops at a bad record), it prints how many times the
optimized plan decodes a value (from_json, or from_avro) and the median seconds of `repeats`
runs writing the frame to Spark's noop sink (every column computed, nothing kept); and, for
avro, what reading the header alone costs, as a schema id number and as a byte match; then
Avro's records/s against JSON's in each case (the pipeline bench's `--only formats` measures the
same against a whole App, where decoding is a small share of a record's cost).

The avro values are a zero byte, schema id 7 and spark-avro's encoding of the record; the json
values are the same records as JSON. Run it with another tree first on PYTHONPATH to compare.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from pyspark.sql import DataFrame, SparkSession

from rillet.driverapi import runspecs
from rillet.runtime.driver import driving, localspark
from rillet.runtime.queries import avrorecords, reading
from rillet_devstack import spark as devspark

WRITER_ID = 7
SCHEMA = {
    "type": "record",
    "name": "order",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
DDL = "id BIGINT, customer STRING, amount DOUBLE, tags ARRAY<STRING>"
WRITER = json.dumps(SCHEMA)
# The reader adds a field (a later version): its text differs from the writer's, so a decode
# is one occurrence of the writer's schema in the plan.
NOTE = {"name": "note", "type": ["null", "string"], "default": None}
READING = avrorecords.AvroReading(
    reader=json.dumps({**SCHEMA, "fields": [*SCHEMA["fields"], NOTE]}), writers={WRITER_ID: WRITER}
)
# Ways to read a header, each alone in a projection (header_probe).
HEADERS = {
    "length(value) alone": "length(value)",
    "schema id by conv(hex(...))": (
        "CASE WHEN length(value) >= 5 AND substring(value, 1, 1) = X'00' "
        "THEN CAST(conv(hex(substring(value, 2, 4)), 16, 10) AS BIGINT) END"
    ),
    "header matched as bytes": f"startswith(value, X'00{WRITER_ID:08X}')",
}
RECORD = (
    "named_struct('id', id, 'customer', concat('customer-', id % 1000), "
    "'amount', id * 1.5D, 'tags', array('a', concat('t', id % 7)))"
)


def session() -> SparkSession:
    """A local[1] session with the connector jars (spark-avro), HotSpot's defaults."""
    driving.local_workers_run_this_python()
    jars = [str(jar) for jar in devspark.spark_jars()]
    builder = SparkSession.builder.master("local[1]")
    for key, value in localspark.local_spark_conf(jars=jars, master="local[1]").items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def kafka_rows(spark: SparkSession, fmt: str, rows: int) -> DataFrame:
    """`rows` records as Spark's Kafka source gives them, cached and counted."""
    if fmt == "avro":
        value = f"concat(X'00{WRITER_ID:08X}', to_avro({RECORD}, '{WRITER}'))"
    else:
        value = f"CAST(to_json({RECORD}) AS BINARY)"
    frame = spark.range(rows, numPartitions=1).selectExpr(
        "CAST(CAST(id AS STRING) AS BINARY) AS key",
        f"{value} AS value",
        "'orders' AS topic",
        "0 AS partition",
        "id AS offset",
        "TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) AS timestamp",
    )
    frame.cache().count()
    return frame


def spec(*, dead_letters: bool) -> runspecs.RunSpec:
    return runspecs.RunSpec(
        app="orders",
        namespace="bench",
        consumer_group="rillet.bench.orders",
        bootstrap_servers="127.0.0.1:9092",
        checkpoint_location="/tmp/rillet-bench-decoding",
        inputs=(),
        pipeline=runspecs.PipelineSpec(sql="SELECT 1"),
        outputs=(),
        shuffle_partitions=1,
        dead_letter_topic="orders-dead-letters" if dead_letters else None,
    )


def decodes(frame: DataFrame, fmt: str) -> int:
    """Decodes of a value in the optimized plan: from_json, or from_avro with the writer's
    schema and options (a CASE may hold another, typing, from_avro, with the reader's; the
    cached input's plan has to_avro with the writer's, without options)."""
    plan = str(frame._jdf.queryExecution().optimizedPlan().toString())
    return plan.count("from_json(") if fmt == "json" else plan.count(f"{WRITER}, (mode,")


def seconds(frame: DataFrame, repeats: int) -> float:
    """Median seconds of writing the frame to the noop sink."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        frame.write.format("noop").mode("overwrite").save()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def header_probe(raw: DataFrame, repeats: int) -> None:
    """Seconds of each way to read the avro header (HEADERS) over the same records."""
    for name, expr in HEADERS.items():
        frame = raw.selectExpr(f"{expr} AS header")
        seconds(frame, 1)  # its generated code compiled: the first run of each is slower
        figure = seconds(frame, repeats)
        print(f"avro header, {name}: {figure:.3f} s, median of {repeats}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    spark = session()
    rates: dict[tuple[str, str], float] = {}  # records/s by (format, case)
    for fmt in ("avro", "json"):
        raw = kafka_rows(spark, fmt, args.rows)
        item = runspecs.InputSpec(
            name="orders", kind="topic", topic="orders", format=fmt, value_schema=DDL
        )
        seconds(raw, 1)  # warm-up: the JIT, the codecs
        if fmt == "avro":
            header_probe(raw, args.repeats)
        for dead_letters in (False, True):
            view, bad = reading.parse_records(spec(dead_letters=dead_letters), item, raw, READING)
            frames = {"view": view, **({"bad records": bad} if bad is not None else {})}
            for name, frame in frames.items():
                figure = seconds(frame, args.repeats)
                case = f"{'with' if dead_letters else 'without'} dead-letter topic, {name}"
                rates[fmt, case] = args.rows / figure
                print(
                    f"{fmt} {case}: "
                    f"{decodes(frame, fmt)} decode(s) per record in the plan, "
                    f"{figure:.2f} s for {args.rows} records ({args.rows / figure:,.0f}/s), "
                    f"median of {args.repeats}",
                    flush=True,
                )
        raw.unpersist()
    spark.stop()
    for (fmt, case), rate in rates.items():
        if fmt == "avro":  # issue 37's target: Avro decodes at least as fast as JSON parses
            print(f"Avro/JSON, {case}: {rate / rates['json', case]:.2f}x records/s")


if __name__ == "__main__":
    main()
