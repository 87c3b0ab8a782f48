"""Spark with its Kafka connector and S3A: the jars pyspark lacks, and a session configured
with them.

The jars come from the cache (`spark.jars`), never from `spark.jars.packages`, which resolves
again in every JVM through Ivy and ignores the Maven setup of the machine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rillet.runtime import jvm
from rillet_devstack import provisioning

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def spark_jars() -> list[Path]:
    """The jars Spark needs beyond pyspark's, provisioned into the cache if missing: the
    Kafka connector's, Avro's, S3A's (s3a:// checkpoints, as in the runtime image) and Rillet's own
    (runtime.jvm). In local mode the executors share the driver's JVM, whose Hadoop FileSystem
    finds S3A through spark.jars."""
    connector = provisioning.provision(provisioning.SPARK_KAFKA) / "libs"
    avro = provisioning.provision(provisioning.SPARK_AVRO) / "libs"
    s3a = provisioning.provision(provisioning.SPARK_S3A) / "libs"
    rillet = provisioning.provision(provisioning.RILLET_SPARK) / jvm.JAR
    return [
        *sorted(connector.glob("*.jar")),
        *sorted(avro.glob("*.jar")),
        *sorted(s3a.glob("*.jar")),
        rillet,
    ]


def class_archive() -> Path | None:
    """The drivers' class-data sharing archive `rillet dev up` made, if it did."""
    archive = provisioning.SPARK_CLASSES.directory / provisioning.SPARK_CLASSES_FILE
    return archive if provisioning.SPARK_CLASSES.present else None


def set_up_environment(command: str) -> None:
    """Before a Spark command of `rillet` (the `rillet.spark_setups` entry point): the jars, and
    for `run` the class archive, unless the environment names them (as the runtime image does)."""
    if not os.environ.get("RILLET_SPARK_JARS"):
        # Outside the runtime image, Spark's Kafka connector comes from the local stack's cache
        # (provisioned on first use). Only for the Spark commands: the others never need it.
        os.environ["RILLET_SPARK_JARS"] = ",".join(str(jar) for jar in spark_jars())
    # Likewise the drivers' class archive, if `rillet dev up` made one.
    wanted = command == "run" and not os.environ.get("RILLET_SPARK_CLASS_ARCHIVE")
    if wanted and (archive := class_archive()) is not None:
        os.environ["RILLET_SPARK_CLASS_ARCHIVE"] = str(archive)


def build_local_conf(
    *, app_name: str, jars: list[Path], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Spark conf of a small local session: connector jars and Rillet's (with what its jar adds,
    as an App's session has it), few shuffle partitions, no UI."""
    conf = {
        "spark.app.name": app_name,
        "spark.jars": ",".join(str(jar) for jar in jars),
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": "WARN",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        **(extra or {}),
    }
    return conf | jvm.jar_conf(conf)


def local_session(
    app_name: str, *, master: str = "local[2]", conf: Mapping[str, str] | None = None
) -> SparkSession:
    """A SparkSession that can read and write Kafka."""
    from pyspark.sql import SparkSession

    from rillet.runtime.driver.driving import local_workers_run_this_python

    # The first session of a process fixes its Python workers' interpreter: the runtime's
    # sessions, made later in the same process (tests), need this one's packages.
    local_workers_run_this_python()
    builder = SparkSession.builder.master(master)
    for key, value in build_local_conf(app_name=app_name, jars=spark_jars(), extra=conf).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
