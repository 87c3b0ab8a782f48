"""Running an App's pipeline over its input views: inline Spark SQL or a Python function.

SQL: the statements run in order; the earlier ones typically create temporary views, the last is
the result. An output's `from` names a view (an input or one the statements made). Each statement
is a query or `CREATE [OR REPLACE] TEMPORARY VIEW <name> AS <query>`, nothing else (see
check_statement).

Python: `module:function` is imported and called as `function(spark, inputs)`, with the
SparkSession and a dict of the input DataFrames by input name (the same DataFrames the views
show). It returns a DataFrame (the result), or a dict of DataFrames by result name, which an
output's `from` names. This is the contract `appflows.PythonPipeline` documents.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame, SparkSession

from rillet.driverapi import runspecs
from rillet.runtime.queries import statements


class PipelineError(ValueError):
    """The pipeline cannot give what the outputs ask for."""


@dataclasses.dataclass(frozen=True)
class Results:
    """What a pipeline produced: a default result and/or named results."""

    spark: SparkSession
    default: DataFrame | None
    named: Mapping[str, DataFrame]
    sql: bool

    def get(self, name: str | None) -> DataFrame:
        """The result an output writes: `name` (its `from`), or the single/default result."""
        frame = self._lookup(name)
        if not frame.isStreaming:
            raise PipelineError(
                f"result {name or '(default)'} is not a stream (it reads only Tables?): an "
                f"output must be computed from at least one topic input"
            )
        return frame

    def _lookup(self, name: str | None) -> DataFrame:
        if name is None:
            if self.default is not None:
                return self.default
            if len(self.named) == 1:
                return next(iter(self.named.values()))
            raise PipelineError(
                f"the pipeline has no single result (results: {', '.join(self.named) or '-'}): "
                f"name one with the output's from"
            )
        if name in self.named:
            return self.named[name]
        if self.sql:
            try:
                return self.spark.table(name)
            except AnalysisException:
                pass
        raise PipelineError(f"the pipeline has no result or view {name!r}")


def run_pipeline(
    spark: SparkSession, pipeline: runspecs.PipelineSpec, inputs: Mapping[str, DataFrame]
) -> Results:
    """Run the SQL statements or call the Python function; returns its results (not started)."""
    if pipeline.sql is not None:
        return run_sql(spark, pipeline.sql)
    assert pipeline.python is not None  # the API admits exactly one of the two
    return run_python(spark, pipeline.python, inputs)


def check_statement(spark: SparkSession, statement: str) -> None:
    """Refuse a statement that is not a query nor a temporary view of one (PipelineError).

    An App's SQL computes; it does not change the session or reach outside it. A command would:
    SET turns settings back (spark.sql.runSQLOnFiles, which keeps SQL from reading files such
    as the driver's ServiceAccount token by path), CREATE TEMPORARY VIEW ... USING text
    OPTIONS (path ...) reads any file, ADD JAR loads code, INSERT or CREATE TABLE write. Spark's
    own parser decides what the statement is, so no spelling gets past a keyword list."""
    parser: Any = spark._jsparkSession.sessionState().sqlParser()  # only reachable through py4j
    try:
        plan = parser.parsePlan(statement)
    except (ParseException, Py4JJavaError):
        return  # a syntax error: spark.sql reports it, as Spark words it
    kind = plan.getClass().getSimpleName()
    if kind == "CreateViewCommand":
        if plan.viewType().toString() == "LocalTempView":
            return
    else:
        try:
            parser.parseQuery(statement)
            return
        except (ParseException, Py4JJavaError):  # not a query (pyspark converts Spark's error)
            pass
    # The first word and Spark's name for the statement, not its text (SET may carry a value).
    first = statement.split()[0].upper()
    raise PipelineError(
        f"pipeline.sql may hold only queries and CREATE [OR REPLACE] TEMPORARY VIEW <name> AS "
        f"<query>; a {first} statement ({kind}) is refused: settings, files, jars and tables "
        f"are not the pipeline's to change"
    )


def run_sql(spark: SparkSession, sql: str) -> Results:
    """Run each statement; the last one's DataFrame is the default result when it is a query."""
    parts = statements.split_statements(sql)
    if not parts:
        raise PipelineError("pipeline.sql holds no statement")
    for statement in parts:
        check_statement(spark, statement)
    frames = [spark.sql(statement) for statement in parts]
    last = frames[-1]
    # A last statement that made a view (a command) returns an empty, non-streaming frame.
    default = last if last.isStreaming else None
    return Results(spark=spark, default=default, named={}, sql=True)


def load_function(entrypoint: str) -> object:
    """The function named by "module:function"."""
    module_name, _, function_name = entrypoint.partition(":")
    module = importlib.import_module(module_name)
    function = getattr(module, function_name, None)
    if not callable(function):
        raise PipelineError(f"{entrypoint}: {module_name} has no function {function_name}")
    return function


def run_python(spark: SparkSession, entrypoint: str, inputs: Mapping[str, DataFrame]) -> Results:
    """Call `function(spark, inputs)`; it returns a DataFrame or a dict of them by name."""
    function = load_function(entrypoint)
    assert callable(function)
    returned = function(spark, dict(inputs))
    if isinstance(returned, DataFrame):
        return Results(spark=spark, default=returned, named={}, sql=False)
    if isinstance(returned, Mapping) and all(
        isinstance(k, str) and isinstance(v, DataFrame) for k, v in returned.items()
    ):
        return Results(spark=spark, default=None, named=dict(returned), sql=False)
    raise PipelineError(
        f"{entrypoint} returned {type(returned).__name__}: it must return a DataFrame or a dict "
        f"of DataFrames by result name"
    )
