"""How a driver's wait on its queries ends: cleanly only when they ended without an error.

Test plan:
- a query that fails while the driver looks at it (active at one read, failed at the next) is
  a failure, never an App that ended cleanly (its driver would exit 0, the error lost);
- queries that ended without an error end the wait; a query stopped by the driver's own gate
  is no failure;
- the first failed query's error is the one reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from rillet.driverapi import runspecs
from rillet.runtime.driver import driving, querystates
from rillet.runtime.queries import writing

SPEC = runspecs.RunSpec(
    app="clicks",
    namespace="web",
    consumer_group="rillet.web.clicks",
    bootstrap_servers="kafka:9092",
    checkpoint_location="/checkpoint/clicks",
    inputs=(runspecs.InputSpec(name="clicks", kind="topic", topic="web.clicks", format="string"),),
    pipeline=runspecs.PipelineSpec(sql="SELECT raise_error('bad line')"),
    outputs=(
        runspecs.OutputSpec(
            id="topic-out", kind="topic", topic="web.out", result="out", mode="append"
        ),
    ),
    shuffle_partitions=4,
)


class Query:
    """A query as Spark reports it: active at each read of `activity`, then ended with `error`."""

    def __init__(self, name: str, activity: list[bool], error: str | None = None) -> None:
        self.name = name
        self._activity: Iterator[bool] = iter(activity)
        self._error = error

    @property
    def isActive(self) -> bool:  # noqa: N802 - pyspark's name
        return next(self._activity, False)

    def exception(self) -> str | None:
        return self._error


def _driver(*queries: Query) -> driving.Driver:
    driver = driving.Driver(cast(SparkSession, None), SPEC)
    driver.started = [
        writing.Started(query=cast(StreamingQuery, query), gate=None) for query in queries
    ]
    return driver


def test_a_query_failing_while_the_driver_looks_is_a_failure_not_a_clean_end() -> None:
    failing = Query("out", activity=[True], error="bad line: 7")

    with pytest.raises(driving.QueryFailedError, match="query out failed: bad line: 7"):
        _driver(failing).wait()


def test_queries_that_ended_without_an_error_end_the_wait() -> None:
    _driver(Query("out", activity=[True, True]), Query("dead-letters", activity=[])).wait()


def test_a_query_stopped_at_the_drivers_gate_is_no_failure() -> None:
    gated = Query("out", activity=[], error=f"batch refused: {writing.STOP_MARKER}")

    _driver(gated).wait()


def test_the_first_failed_query_is_reported() -> None:
    queries = [
        Query("out", activity=[True] * 3),
        Query("table", activity=[False] * 3, error="first"),
        Query("dead-letters", activity=[False] * 3, error="second"),
    ]

    ended, failure = querystates.outcome(
        [cast(StreamingQuery, q) for q in queries], ignored=writing.STOP_MARKER
    )

    assert (ended, failure) == (False, "query table failed: first")
