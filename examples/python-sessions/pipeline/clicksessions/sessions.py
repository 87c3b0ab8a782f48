"""The App's pipeline: each user's clicks in 5-minute windows of event time (their visits), with
how many clicks and which sections of the site they saw.

Rillet calls `build(spark, inputs)` once, in the driver, with the input views by name; it
returns the DataFrame the App's output writes. Everything here is a DataFrame operation, which
Spark runs in the executors, in parallel over the input's partitions: nothing is collected to
the driver.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql import types as T  # noqa: N812

from clicksessions import sections

VISIT_WINDOW = "5 minutes"


def build(spark: SparkSession, inputs: dict[str, DataFrame]) -> DataFrame:
    """Visits per user and window: clicks, and the sections seen (sorted, each once)."""
    # A UDF of a module-level function of the package: Spark sends the workers its name, and
    # each worker imports it from the image's venv.
    section = F.udf(sections.section_of, T.StringType())
    clicks = inputs["clicks"].withColumn("section", section("page"))
    visits = clicks.groupBy("user_id", F.window("ts", VISIT_WINDOW)).agg(
        F.count(F.lit(1)).alias("clicks"),
        F.array_sort(F.collect_set("section")).alias("sections"),
    )
    return visits.select(
        "user_id",
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        "clicks",
        "sections",
    )
