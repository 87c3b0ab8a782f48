"""An App's observation as the status is derived from it: a running driver, three of nine
executors wanted and two ready, two inputs with their lag, changed as a test says; and what a
driver's termination log holds when Spark fails or the checkpoint is lost."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rillet.reconcile.appobservations import AppObservation, DriverObservation, InputObservation

NOW = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
RUNNING_DRIVER = DriverObservation(phase="Running", ready=True)
LOST = "the checkpoint holds no offsets for table-counts (12 records in topic counts); restore it"
INPUTS = (
    InputObservation(name="clicks", topic="clicks", partitions=6, lag=1200),
    InputObservation(name="views", topic="team.views", partitions=3, lag=30),
)
SPARK_TAIL = """Traceback (most recent call last):
  File "/opt/rillet/venv/bin/rillet", line 8, in <module>
pyspark.errors.exceptions.captured.AnalysisException: [UNRESOLVED_COLUMN] `wrd` cannot be resolved.
25/03/04 05:06:07 INFO SparkContext: Successfully stopped SparkContext
25/03/04 05:06:07 INFO ShutdownHookManager: Deleting directory /tmp/spark-1
"""


def observe(**changes: Any) -> AppObservation:
    """The observation, its fields updated with `changes`."""
    base: dict[str, Any] = {
        "generation": 4,
        "driver": RUNNING_DRIVER,
        "executors_desired": 3,
        "executors_ready": 2,
        "executors_cap": 9,
        "inputs": INPUTS,
    }
    return AppObservation(**(base | changes))


def condition_statuses(status: dict[str, Any]) -> tuple[str, ...]:
    """The statuses of the conditions of an App's `status`, in order."""
    return tuple(c["status"] for c in status["conditions"])
