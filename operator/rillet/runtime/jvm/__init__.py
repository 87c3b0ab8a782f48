"""The runtime's JVM half: Java that Spark runs, and the names its jar goes by.

The sources beside this module are compiled into JAR against pyspark's jars and the connector's
Kafka client, by the runtime image's build (images/runtime/Dockerfile) and by the local stack
(rillet.devstack.provisioning):
- TransactionalWriter.java, the exactly-once writer (rillet.runtime.transactions);
- WarmupPlugin.java, a Spark plugin that initializes, as a JVM starts, classes the first batch
  would otherwise wait for (plugin_conf).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

SOURCES: Final = tuple(sorted(Path(__file__).parent.glob("*.java")))
JAR: Final = "rillet-spark.jar"
WRITER_CLASS: Final = "rillet.spark.TransactionalWriter"
WARMUP_PLUGIN: Final = "rillet.spark.WarmupPlugin"

JARS_KEY: Final = "spark.jars"
PLUGINS_KEY: Final = "spark.plugins"


def plugin_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """spark.plugins with the warm-up plugin added (after the App's own plugins, if any), when
    spark.jars lists JAR; else nothing: a JVM that cannot load a plugin's class fails to start."""
    jars = [jar for jar in conf.get(JARS_KEY, "").split(",") if jar]
    if not any(Path(jar).name == JAR for jar in jars):
        return {}
    plugins = [p.strip() for p in conf.get(PLUGINS_KEY, "").split(",") if p.strip()]
    if WARMUP_PLUGIN not in plugins:
        plugins.append(WARMUP_PLUGIN)
    return {PLUGINS_KEY: ",".join(plugins)}
