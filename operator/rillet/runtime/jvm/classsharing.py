"""A class-data sharing (CDS) archive of the Spark driver's classes: drivers start sooner.

A driver's JVM loads and verifies some 15,000 classes (Spark, Scala, Kafka's client, Janino)
before its first batch, and does so at every start: a first deploy, a rolling upgrade, a crash,
a rescale that restarts. A CDS archive holds them already parsed and verified, mapped at start.

`build` runs, in a JVM of its own that writes the archive as it exits, a small job that loads
what an App's driver loads: a session with the Kafka connector, the Kafka source resolved,
records decoded and encoded in Avro and JSON, a stateful streaming query run for a few batches.
Avro's classes count: without them, an Avro App's driver spent about 0.3 s more than a JSON
App's planning its inputs (docs/decisions/025-avro-start.md). The runtime image builds one at
its build (RILLET_SPARK_CLASS_ARCHIVE names it); `rillet dev up` builds one in the cache for
`rillet run`.
`java_options` gives the flag a driver JVM starts with: an archive made by another JDK or with
other jars is ignored by the JVM, which then loads its classes as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from rillet.reconcile import sparkdefaults

ARCHIVE_ENV: Final = "RILLET_SPARK_CLASS_ARCHIVE"
DRIVER_JAVA_OPTIONS: Final = "spark.driver.extraJavaOptions"

# Run by `build` in a Python process of its own: its JVM writes the archive when it exits.
_WARM_UP = """
import json, sys, time
from pyspark import SparkContext
from pyspark.sql import SparkSession

archive, jars, checkpoint, conf = sys.argv[1:5]
builder = SparkSession.builder.master("local[1]").config("spark.jars", jars)
for key, value in json.loads(conf).items():
    builder = builder.config(key, value)
spark = builder.config("spark.driver.extraJavaOptions", "-XX:ArchiveClassesAtExit=" + archive)
spark = spark.getOrCreate()

# Kafka's clients, as the source and sink make them: made and closed, no broker needed.
clients = spark._jvm.org.apache.kafka.clients
serialization = "org.apache.kafka.common.serialization"
for make, side in (
    (clients.consumer.KafkaConsumer, "Deserializer"),
    (clients.producer.KafkaProducer, "Serializer"),
):
    props = spark._jvm.java.util.Properties()
    props.put("bootstrap.servers", "127.0.0.1:9")
    for part in ("key", "value"):
        props.put(part + "." + side.lower(), serialization + ".ByteArray" + side)
    make(props).close()
kafka = spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9")
kafka.option("subscribe", "warm-up").load().selectExpr("CAST(value AS STRING)").schema

# Avro and JSON records decoded and encoded, as an App's inputs and outputs of those formats
# are (spark-avro's from_avro and to_avro, Spark's from_json and to_json), planned and run.
avro = json.dumps({"type": "record", "name": "r", "fields": [{"name": "n", "type": "long"}]})
spark.range(100).selectExpr("named_struct('n', id) AS row").selectExpr(
    "to_avro(row, '%s') AS avro" % avro, "to_json(row) AS json"
).selectExpr(
    "from_avro(avro, '%s', map('mode', 'PERMISSIVE')) AS avro" % avro,
    "from_json(json, 'n BIGINT', map('mode', 'PERMISSIVE')) AS json",
).collect()

# A stateful query written through foreachBatch, as an App's Table output is.
rate = spark.readStream.format("rate").option("rowsPerSecond", 1000).load()
counts = rate.selectExpr("CAST(value % 10 AS STRING) AS word").groupBy("word").count()
query = (
    counts.selectExpr("word AS key", "to_json(struct(word, count)) AS value")
    .writeStream.outputMode("update")
    .foreachBatch(lambda batch, batch_id: batch.count())
    .option("checkpointLocation", checkpoint + "/warm-up")
    .trigger(processingTime="200 milliseconds")
    .start()
)
deadline = time.monotonic() + 120
while (query.lastProgress is None or query.lastProgress["batchId"] < 3) and query.isActive:
    if time.monotonic() > deadline:
        sys.exit("the warm-up query made no progress in 120 s")
    time.sleep(0.1)
query.stop()
spark.stop()
# The JVM writes the archive as it exits, which it does once its stdin closes: wait for it.
gateway = SparkContext._gateway
gateway.proc.stdin.close()
sys.exit(gateway.proc.wait())
"""

# The settings of an App's session that decide which classes its driver loads (its state
# store, its checkpoint files): sparkdefaults.build_spark_conf's.
_APP_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.stateStore.providerClass": sparkdefaults.ROCKSDB_PROVIDER,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.streaming.checkpointFileManagerClass": sparkdefaults.CHECKPOINT_FILE_MANAGER,
}


def archive_path(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The archive drivers use: RILLET_SPARK_CLASS_ARCHIVE, if it names a file."""
    named = environ.get(ARCHIVE_ENV)
    return Path(named) if named and Path(named).is_file() else None


def java_options(conf: Mapping[str, str], archive: Path | None) -> dict[str, str]:
    """The driver's extraJavaOptions with the archive's flag added (to the App's own, if any);
    empty without an archive."""
    if archive is None:
        return {}
    own = conf.get(DRIVER_JAVA_OPTIONS, "")
    return {DRIVER_JAVA_OPTIONS: f"{own} -XX:SharedArchiveFile={archive}".strip()}


def build(archive: Path, jars: Sequence[str], *, timeout: float = 600) -> None:
    """Write the archive (written beside it, then renamed: a driver never maps a half-written
    one); raises CalledProcessError, with the warm-up's output, when it fails."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f".{archive.name}.{os.getpid()}")
    try:
        with tempfile.TemporaryDirectory() as scratch:
            command = [sys.executable, "-c", _WARM_UP, str(partial), ",".join(jars), scratch]
            command.append(json.dumps(_APP_CONF))
            # Bound to loopback: an image build's container may have no resolvable hostname.
            env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
            subprocess.run(
                command,
                check=True,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                cwd=scratch,  # whatever Spark leaves in its working directory goes with it
            )
        if not partial.is_file():
            raise RuntimeError("the warm-up's JVM exited without writing its class archive")
        os.replace(partial, archive)
    finally:
        partial.unlink(missing_ok=True)
