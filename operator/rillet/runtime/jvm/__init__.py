"""The runtime's JVM half: Java that Spark's tasks run, and the names its jar goes by.

TransactionalWriter.java, the exactly-once writer (rillet.runtime.transactions), is compiled
into WRITER_JAR against pyspark's jars and the connector's Kafka client: by the runtime image's
build (images/runtime/Dockerfile) and by the local stack (rillet.devstack.provisioning).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

WRITER_SOURCE: Final = Path(__file__).with_name("TransactionalWriter.java")
WRITER_JAR: Final = "rillet-spark-writer.jar"
WRITER_CLASS: Final = "rillet.spark.TransactionalWriter"
