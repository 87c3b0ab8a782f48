"""Rillet's Spark defaults: the Spark settings of a run spec, which every App's driver runs with.

Purely computational. One builder, `build_spark_conf`: the operator puts its result in the
driver pod's Spark conf (reconcile.appobjects.sparkconfs, sent as wiring.SPARK_CONF_ENV), and
`rillet run` (which has no operator) builds it in process (runtime.driver.driving); the driver never
builds it again from a run spec the operator already built it for. So a driver pod runs with the
defaults of the operator's release, whatever its runtime image: a default a runtime needs in
order to work (not only to run better) is a contract change (driverapi.runspecs.CONTRACT_VERSION).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from rillet.api.v1alpha1 import appresources
from rillet.driverapi import runspecs
from rillet.reconcile import naming

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CHECKPOINT_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)
# Spark's checkpoint file manager for S3A: it writes each file straight to its key, visible only
# once closed, where the default writes a temporary object and renames it (a COPY and a DELETE
# on S3): a third of the requests per batch. From spark-hadoop-cloud, which the runtime image
# and the local stack carry (rillet_devstack.s3ajars).
S3A_CHECKPOINT_FILE_MANAGER = (
    "org.apache.spark.internal.io.cloud.AbortableStreamBasedCheckpointFileManager"
)
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
# Task scheduling of every App (see build_spark_conf), unless its sparkConf says otherwise.
SCHEDULING_DEFAULTS: Final[Mapping[str, str]] = {"spark.locality.wait": "0s"}
# How long a query running batches back to back waits, after finding no new record, before it
# asks Kafka again (Spark's default is 10 ms; see build_spark_conf).
POLLING_DELAY = "spark.sql.streaming.pollingDelay"
IDLE_POLLING_DELAY: Final = "250ms"
# Rillet's Spark defaults that a release may add or change without restarting running drivers
# (the spec hash skips them at these values): each takes effect at a driver's next start.
RESTART_FREE_DEFAULTS: Final[Mapping[str, str]] = {
    **SCHEDULING_DEFAULTS,
    POLLING_DELAY: IDLE_POLLING_DELAY,
}

# Settings that keep an App to itself, last so nothing moves them (the API refuses them in an
# App's sparkConf too: appsparkconf.SECURITY). SQL reads no file by path (SELECT * FROM
# text.`/var/run/secrets/...` would read the driver's ServiceAccount token), and no UI listens
# in the pods: it showed every setting and plan to any pod that reached port 4040, and nothing
# of Rillet reads it (metrics have their own port). Not restart-free: a release that adds one
# restarts the drivers, so that no App runs without it.
SECURITY_DEFAULTS: Final[Mapping[str, str]] = {
    "spark.sql.runSQLOnFiles": "false",
    "spark.ui.enabled": "false",
}

# HotSpot's compile thresholds times 3: its JIT threads then compete less with a starting
# App's tasks for the cores. Measured on 2 cores (docs/runtime.md, "Starting"): the word count
# restarted to its first committed batch in 8.1 s instead of 8.9, caught up 1,000,000 lines
# in 9.3 to 9.8 s instead of 9.9 to 10.5, and ran 8% faster in steady state. Compiling
# earlier (0.1) or C1 only was slower.
JIT_OPTION: Final = "-XX:CompileThresholdScaling=3"
# The parallel collector rather than G1: a micro-batch wants throughput, its state lives off
# the heap (RocksDB), and G1's concurrent work takes a core a task could use. Measured on 2
# cores (docs/runtime.md, "Starting"): the word count catching up on 2,000,000 lines ran 3 to
# 11% faster in steady state. A JVM with one core (a small executor) picks the serial
# collector by itself; this one is the serial one's parallel form.
GC_OPTION: Final = "-XX:+UseParallelGC"
_COLLECTOR: Final = re.compile(r"-XX:\+Use\w+GC\b")
JVM_ROLES: Final = ("driver", "executor")


def jvm_defaults(spark_conf: Mapping[str, str]) -> dict[str, str]:
    """The defaultJavaOptions of the App's driver and executors: JIT_OPTION and GC_OPTION,
    without GC_OPTION for a JVM whose extraJavaOptions in the App's sparkConf choose a collector
    (a JVM given two collectors does not start). An App may not set defaultJavaOptions (the API
    refuses them): its own flags go in extraJavaOptions, which come after these.
    """
    defaults = {}
    for role in JVM_ROLES:
        own = spark_conf.get(f"spark.{role}.extraJavaOptions", "")
        options = [JIT_OPTION] if _COLLECTOR.search(own) else [JIT_OPTION, GC_OPTION]
        defaults[f"spark.{role}.defaultJavaOptions"] = " ".join(options)
    return defaults


# Classes a task would otherwise initialize inside the App's first batch, by what in the
# pipeline's SQL reaches them; the warm-up plugin (runtime/jvm/WarmupPlugin.java) initializes
# them as each JVM starts. Spark's ICU case mappings (lower, upper, initcap) build a table over
# every Unicode code point first: about 1 s of one core in the word count's first batch. Only
# what the SQL names: on two cores that second costs a scaling executor's first tasks when
# nothing uses it. A Python pipeline's functions cannot be read here, so it gets none.
WARMUP_CLASSES_KEY: Final = "spark.rillet.warmup.classes"
_WARMUPS: Final = (
    (
        re.compile(r"\b(lower|lcase|upper|ucase|initcap)\s*\(", re.IGNORECASE),
        "org.apache.spark.sql.catalyst.util.CollationAwareUTF8String",
    ),
)


def warmup_classes(spec: runspecs.RunSpec) -> list[str]:
    """The classes the App's JVMs initialize as they start (WARMUP_CLASSES_KEY)."""
    sql = spec.pipeline.sql or ""
    return [name for pattern, name in _WARMUPS if pattern.search(sql)]


def checkpoint_store_conf(*, location: str, endpoint: str | None) -> dict[str, str]:
    """The settings of a checkpoint at `location` in an object store: for s3a://, Spark's file
    manager for S3A (S3A_CHECKPOINT_FILE_MANAGER), and with the `endpoint` of an S3-compatible
    store, that endpoint, buckets addressed by path (a bucket's own DNS name would have to
    resolve to the store) and TLS as the endpoint's scheme says. No region: S3A needs none with
    an endpoint, and finds AWS's by itself. Credentials are no setting: see
    appobjects.pods.checkpoint_credentials."""
    if not location.startswith(appresources.S3A_SCHEME):
        return {}
    conf = {"spark.sql.streaming.checkpointFileManagerClass": S3A_CHECKPOINT_FILE_MANAGER}
    if endpoint:
        conf |= {
            "spark.hadoop.fs.s3a.endpoint": endpoint,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": str(
                endpoint.startswith("https:")
            ).lower(),
        }
    return conf


def build_spark_conf(
    spec: runspecs.RunSpec, *, checkpoint_endpoint: str | None = None
) -> dict[str, str]:
    """The Spark settings the App's driver runs with (besides master, jars and deploy settings).

    RocksDB with changelog checkpointing keeps large state off the JVM heap and uploads only the
    changes at each batch. The App's sparkConf comes last and wins (it cannot name the keys Rillet
    reserves: the API refuses them).

    Checkpoint files go through Hadoop's FileSystem API rather than Spark's default FileContext
    for local paths (a volume): without Hadoop's native library, FileContext's rename runs a
    `readlink` process per file, several per batch, which cost a stateful micro-batch ~200 ms
    of its ~550. FileSystem renames are atomic on local disks and HDFS. An s3a:// checkpoint
    gets S3A's own manager instead and, for an S3-compatible store, its `checkpoint_endpoint`
    (checkpoint_store_conf); the App's sparkConf still wins.

    Tasks never wait for a busy executor they prefer (`spark.locality.wait` 0): a Kafka read
    prefers the executor whose consumer it used last, so Spark's default 3 s per locality level,
    reset each time that executor starts one of them, kept a burst's tasks queued on the one
    executor that was running while new executors sat idle (measured: the new ones got tasks
    12 s after they joined). With no wait an idle executor still takes the tasks that prefer it
    first: in steady state (one task per partition, no more tasks than cores) every task runs
    where it ran before, and state stores stay put.

    An idle query running batches back to back asks Kafka for its inputs' ends every
    IDLE_POLLING_DELAY, not every 10 ms (Spark's default): on an idle word count the driver
    used 0.41 cores and the broker 0.14 (ListOffsets a hundred times a second per query); at
    250 ms, 0.07 and 0.03 (`bench/pipeline.py --only idle`). A record that arrives at an idle
    query waits for it up to that long, under Kafka's own default fetch.max.wait.ms (500 ms);
    batches of a busy query follow each other at once as before. A processingTime trigger
    already paces the polls, and its own interval is the App's choice: the delay is left to
    Spark there.

    The JVMs compile hot code later than HotSpot's defaults and collect with the parallel
    collector (jvm_defaults), in Spark's defaultJavaOptions, which come before the App's own
    extraJavaOptions (whose flags win).
    They initialize the classes of warmup_classes as they start.

    SECURITY_DEFAULTS come last: SQL over files by path off, and no UI.
    """
    warmups = warmup_classes(spec)
    return {
        "spark.app.name": naming.consumer_group(namespace=spec.namespace, app=spec.app),
        **SCHEDULING_DEFAULTS,
        **({POLLING_DELAY: IDLE_POLLING_DELAY} if runspecs.back_to_back(spec.trigger) else {}),
        **jvm_defaults(spec.spark_conf),
        **({WARMUP_CLASSES_KEY: ",".join(warmups)} if warmups else {}),
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILE_MANAGER,
        **checkpoint_store_conf(location=spec.checkpoint_location, endpoint=checkpoint_endpoint),
        "spark.sql.session.timeZone": "UTC",
        **spec.spark_conf,
        SHUFFLE_PARTITIONS: str(spec.shuffle_partitions),
        **SECURITY_DEFAULTS,
    }
