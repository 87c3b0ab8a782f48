"""The runtime's JVM half: Java that Spark runs, and the names its jar goes by.

The sources beside this module are compiled into JAR against pyspark's jars and the connector's
Kafka client, by the runtime image's build (images/runtime/Dockerfile) and by the local stack
(the dev stack's provisioning):
- TransactionalWriter.java, the exactly-once writer (rillet.runtime.queries.transactions);
- WarmupPlugin.java, a Spark plugin that initializes, as a JVM starts, classes the first batch
  would otherwise wait for;
- SessionExtensions.java and RegexSplitter.java, an optimizer rule that compiles a constant
  split() pattern once per plan instead of once per row.
jar_conf names the plugin and the extensions to Spark wherever the jar is on its class path;
`classsharing` makes and maps a class-data sharing archive of the driver's classes. The bottom of
the runtime's layers: imported by the rest of `runtime` and by the local stack, which builds the
jar and the archive; it imports no other part of the runtime.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

SOURCES: Final = tuple(sorted(Path(__file__).parent.glob("*.java")))
# What the drivers' class archive holds follows from this module's warm-up job: the local
# stack makes its archive again when the module changes.
CLASS_SHARING: Final = Path(__file__).with_name("classsharing.py")
JAR: Final = "rillet-spark.jar"
WRITER_CLASS: Final = "rillet.spark.TransactionalWriter"
WARMUP_PLUGIN: Final = "rillet.spark.WarmupPlugin"
SESSION_EXTENSIONS: Final = "rillet.spark.SessionExtensions"

JARS_KEY: Final = "spark.jars"
PLUGINS_KEY: Final = "spark.plugins"
EXTENSIONS_KEY: Final = "spark.sql.extensions"


def jar_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """spark.plugins with the warm-up plugin and spark.sql.extensions with Rillet's extensions,
    each added after the App's own, when spark.jars lists JAR; else nothing: a JVM that cannot
    load a plugin's class fails to start."""
    jars = [jar for jar in conf.get(JARS_KEY, "").split(",") if jar]
    if not any(Path(jar).name == JAR for jar in jars):
        return {}
    return {
        PLUGINS_KEY: _appended(conf.get(PLUGINS_KEY, ""), WARMUP_PLUGIN),
        EXTENSIONS_KEY: _appended(conf.get(EXTENSIONS_KEY, ""), SESSION_EXTENSIONS),
    }


def _appended(names: str, name: str) -> str:
    """A comma-separated list of class names with `name` last, unless it is there already."""
    listed = [n.strip() for n in names.split(",") if n.strip()]
    return ",".join(listed if name in listed else [*listed, name])
