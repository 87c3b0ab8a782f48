"""The Spark settings of an App run on local Spark (`rillet run`, and bench and tests that run
Apps in-process): pure, no pyspark."""

from __future__ import annotations

import re

# A task that fails is tried this many times in all, as Spark does on a cluster
# (spark.task.maxFailures), which local mode ignores: its master says it (local[N,F]), else 1.
LOCAL_TASK_ATTEMPTS = 4
_LOCAL_MASTER = re.compile(r"local(?:\[(?P<threads>[^,\]]+)\])?")


def local_master_with_retries(master: str) -> str:
    """`local` and `local[N]` given task retries (local[N,4]); any other master as it is.

    Without them one failed task fails the query. One such failure, seen once on a loaded
    machine: a restarted driver's exactly-once write unit "fenced by a newer instance" with
    no other driver running (with the first, Python, writer: librdkafka issue 3928 reports
    producers fenced after their own repeated InitProducerId). Its retry starts a new
    producer and reads the unit's marker again, which is what happens on a cluster."""
    found = _LOCAL_MASTER.fullmatch(master)
    if found is None:
        return master
    return f"local[{found['threads'] or 1},{LOCAL_TASK_ATTEMPTS}]"


def local_spark_conf(*, jars: list[str], master: str) -> dict[str, str]:
    """Spark settings of a local `rillet run`: connector jars, quiet logs, no UI."""
    conf = {
        "spark.jars": ",".join(jars),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": "WARN",
    }
    if master.startswith("local"):
        conf |= {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}
    return conf
