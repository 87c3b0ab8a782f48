"""Python pipelines the runtime's integration tests run (`pipeline.python.entrypoint`).

Each is called as `function(spark, inputs)` with the input DataFrames by view name, and returns a
DataFrame or a dict of DataFrames by result name (the contract of `appflows.PythonPipeline`).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812


def hopping_views(spark: SparkSession, inputs: dict[str, DataFrame]) -> DataFrame:
    """Views per page in 1-minute windows starting every 30 seconds, 30 s of lateness allowed."""
    clicks = inputs["clicks"].withWatermark("ts", "30 seconds")
    return (
        clicks.groupBy("page", F.window("ts", "1 minute", "30 seconds"))
        .count()
        .select("page", "window", F.col("count").alias("views"))
    )


def split_orders(spark: SparkSession, inputs: dict[str, DataFrame]) -> dict[str, DataFrame]:
    """Two results from one input: large and small orders."""
    orders = inputs["orders"]
    return {
        "large": orders.where("amount >= 100"),
        "small": orders.where("amount < 100"),
    }


def listed_clicks(spark: SparkSession, inputs: dict[str, DataFrame]) -> list[DataFrame]:
    """The wrong return type: a list of DataFrames, not a DataFrame or a dict of them."""
    return [inputs["clicks"]]
