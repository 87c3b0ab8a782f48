"""A Python pipeline that cannot give its DataFrames stops the driver before anything runs,
with the Python error's last line (real Spark and Kafka, the driver in this process); so does
SQL that reaches past the App for a file (here, because Spark already runs in this module).

That line is what `rillet drive` writes as the driver's termination message
(`terminating.summarize_error`); the operator shows it as the App's Stalled condition
(DriverCrashLooping) once the kubelet restarts the driver with its back-off, which
test_apps_not_ready_on_node proves on the node for a pipeline that fails at run time.

Test plan (a Topic of clicks, a Table of views, an App naming a Python function):
- a module that raises as it is imported: the driver refuses to start with that error, its
  line `RuntimeError: <the module's message>`;
- a module without the named function: `PipelineError`, naming the entrypoint;
- a function that returns a list of DataFrames: `PipelineError` naming the entrypoint and the
  type it returned, and what it must return;
- in each case no query was started and nothing was written to the Table's topic.

Test plan, SQL reaching for a file (a stand-in for the driver's ServiceAccount token, which a
local run has not): each refused before any query starts, the file's content nowhere in the
error, nothing written:
- `text.`<path>``, joined to the stream so that its rows would reach the Table: Spark does not
  read files by path (spark.sql.runSQLOnFiles=false), the path is an unknown table;
- SET turning spark.sql.runSQLOnFiles back on first: the SET statement is refused;
- CREATE TEMPORARY VIEW ... USING text OPTIONS (path ...): refused (a view AS a query is fine).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from rillet.runtime.pod import terminating
from rillet.runtime.queries import pipelines
from tests.integration import runtime_helpers as rt

MANIFEST = """
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: clicks}
spec: {partitions: 1}
---
apiVersion: rillet.io/v1alpha1
kind: Table
metadata: {name: views}
spec:
  keyFormat: string
  valueSchema: "page STRING, views BIGINT"
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata: {name: clicks-python}
spec:
  image: rillet/spark-runtime:0.1.0
  inputs:
    - name: clicks
      topicRef: {name: clicks}
      schema: "page STRING"
  pipeline:
    python: {entrypoint: ENTRYPOINT}
  outputs:
    - tableRef: {name: views}
      keyColumns: [page]
"""


@pytest.mark.parametrize(
    ("entrypoint", "line"),
    [
        (
            "tests.integration.pipeline_raising_on_import:build",
            "RuntimeError: SECTIONS_URL is not set: the pipeline cannot load its section map",
        ),
        (
            "tests.integration.runtime_pipelines:no_such_function",
            "PipelineError: tests.integration.runtime_pipelines:no_such_function: "
            "tests.integration.runtime_pipelines has no function no_such_function",
        ),
        (
            "tests.integration.runtime_pipelines:listed_clicks",
            "PipelineError: tests.integration.runtime_pipelines:listed_clicks returned list: it "
            "must return a DataFrame or a dict of DataFrames by result name",
        ),
    ],
    ids=["raises-on-import", "missing-function", "wrong-return-type"],
)
def test_a_pipeline_that_gives_no_dataframes_stops_the_driver_with_its_errors_last_line(
    entrypoint: str,
    line: str,
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
) -> None:
    documents = rt.load_manifests(MANIFEST.replace("ENTRYPOINT", entrypoint))
    topics = rt.privatize(documents, kafka_prefix)
    rt.create_topics(
        kafka_admin,
        [NewTopic(topics["clicks"], 1, 1), NewTopic(topics["views"], 1, 1)],
    )
    rt.produce(kafka_bootstrap, topics["clicks"], [(None, '{"page": "/"}')])
    spec = rt.build_spec(documents, bootstrap=kafka_bootstrap, checkpoint=tmp_path / "ck")

    with pytest.raises(Exception) as raised:  # noqa: PT011 - the type is the line's first word
        rt.start_app(spec)

    assert terminating.summarize_error(raised.value) == line
    assert rt.end_offsets(kafka_bootstrap, topics["views"]) == {0: 0}


SQL_MANIFEST = MANIFEST.replace(
    "    python: {entrypoint: ENTRYPOINT}",
    "    sql: |\n      SQL",
).replace("metadata: {name: clicks-python}", "metadata: {name: clicks-sql}")
TOKEN = "eyJhbGciOiJSUzI1NiJ9.a-stand-in-for-the-service-account-token"
JOINED = "SELECT c.page, count(*) AS views FROM clicks c CROSS JOIN {source} t GROUP BY c.page"
REFUSED_STATEMENT = (
    "PipelineError: pipeline.sql may hold only queries and CREATE [OR REPLACE] TEMPORARY VIEW "
    "<name> AS <query>; a {word} statement ({kind}) is refused: settings, files, jars and tables "
    "are not the pipeline's to change"
)


@pytest.mark.parametrize(
    ("sql", "line"),
    [
        (
            JOINED.format(source="text.`{path}`"),
            "AnalysisException: [TABLE_OR_VIEW_NOT_FOUND] The table or view `text`.`{path}` "
            "cannot be found.",
        ),
        (
            "SET spark.sql.runSQLOnFiles=true; " + JOINED.format(source="text.`{path}`"),
            REFUSED_STATEMENT.format(word="SET", kind="SetCommand"),
        ),
        (
            "CREATE TEMPORARY VIEW token USING text OPTIONS (path '{path}'); "
            + JOINED.format(source="token"),
            REFUSED_STATEMENT.format(word="CREATE", kind="CreateTempViewUsing"),
        ),
    ],
    ids=["text-path", "set-it-back", "view-using-text"],
)
def test_sql_cannot_read_a_file_of_the_driver(
    sql: str,
    line: str,
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN, encoding="utf-8")
    statements = sql.format(path=token).replace(";", ";\n     ")
    documents = rt.load_manifests(SQL_MANIFEST.replace("SQL", statements))
    topics = rt.privatize(documents, kafka_prefix)
    rt.create_topics(
        kafka_admin,
        [NewTopic(topics["clicks"], 1, 1), NewTopic(topics["views"], 1, 1)],
    )
    rt.produce(kafka_bootstrap, topics["clicks"], [(None, '{"page": "/"}')])
    spec = rt.build_spec(documents, bootstrap=kafka_bootstrap, checkpoint=tmp_path / "ck")

    try:
        driver = rt.start_app(spec)
    except Exception as error:  # any type: the summary starts with its name
        raised = error
    else:  # the file was read: stop the query, so that only this test fails
        driver.stop()
        driver.close_catalog()
        pytest.fail("the pipeline started: its SQL can read a file of the driver")

    summary = terminating.summarize_error(raised)
    assert summary.startswith(line.format(path=token)), summary
    assert TOKEN not in summary
    assert rt.end_offsets(kafka_bootstrap, topics["views"]) == {0: 0}
    if "statement" in line:
        assert isinstance(raised, pipelines.PipelineError)
