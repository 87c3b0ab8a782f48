"""The runtime's command line and metrics, without Spark or Kafka.

Test plan:
- importing the command line does not import pyspark (the operator image has none);
- `rillet run` refuses to start without the connector jars, or with an App file it cannot
  resolve, saying what to do;
- --conf pairs parse, and a local run binds Spark to 127.0.0.1;
- a local master retries a failed task (local[N,4]), as Spark does on a cluster;
- a finished batch sets the Prometheus series of offsets, lag, rates and dead letters.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from rillet.cli import apps
from rillet.runtime.batches import metrics, progress
from rillet.runtime.driver import localspark

EXAMPLES = Path(__file__).parents[2] / "examples"


def _app() -> typer.Typer:
    app = typer.Typer()
    apps.register(app)
    return app


def test_importing_the_cli_does_not_import_pyspark() -> None:
    code = "import sys, rillet.cli; assert 'pyspark' not in sys.modules, 'pyspark imported'"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("given", "used"),
    [
        ("local", "local[1,4]"),
        ("local[2]", "local[2,4]"),
        ("local[*]", "local[*,4]"),
        ("local[2,1]", "local[2,1]"),  # the user's own count of attempts stays
        ("k8s://https://10.0.0.1:6443", "k8s://https://10.0.0.1:6443"),
        ("spark://host:7077", "spark://host:7077"),
    ],
)
def test_a_local_master_retries_failed_tasks_as_a_cluster_does(given: str, used: str) -> None:
    assert localspark.local_master_with_retries(given) == used


def test_run_without_jars_says_where_they_come_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(apps.JARS_ENV, raising=False)

    result = CliRunner().invoke(_app(), ["run", str(EXAMPLES / "wordcount.yaml"), "-b", "k:1"])

    assert result.exit_code == 2
    assert apps.JARS_ENV in result.output


def test_run_with_several_apps_asks_for_one() -> None:
    result = CliRunner().invoke(
        _app(),
        [
            "run",
            str(EXAMPLES / "enrich-orders.yaml"),
            "-b",
            "k:1",
            "--jars",
            "a.jar",
        ],
    )

    assert result.exit_code == 2
    assert "name one with --app" in result.output


def test_conf_pairs_and_local_spark_conf() -> None:
    assert apps.parse_conf(["a=1", "b.c= x=y"]) == {"a": "1", "b.c": " x=y"}
    with pytest.raises(typer.BadParameter):
        apps.parse_conf(["novalue"])
    conf = localspark.local_spark_conf(jars=["/j/a.jar", "/j/b.jar"], master="local[2]")
    assert conf["spark.jars"] == "/j/a.jar,/j/b.jar"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert "spark.driver.host" not in localspark.local_spark_conf(jars=[], master="k8s://x")


def test_a_batch_sets_offset_lag_and_rate_series() -> None:
    app_metrics = metrics.Metrics(app="wc", namespace="ns")
    batch = progress.parse_progress(
        {
            "name": "wc.table-t",
            "batchId": 3,
            "numInputRows": 10,
            "processedRowsPerSecond": 20.0,
            "durationMs": {"triggerExecution": 250},
            "sources": [{"endOffset": {"s": {"0": 40}}, "latestOffset": {"s": {"0": 55}}}],
            "observedMetrics": {"dead_letters_in": {"rows": 2}},
        }
    )

    app_metrics.on_batch(batch)
    app_metrics.on_commit({("s", 0): 40})

    def value(name: str, **labels: str) -> float | None:
        return app_metrics.registry.get_sample_value(
            name, {"app": "wc", "namespace": "ns", **labels}
        )

    partition = {"query": "wc.table-t", "topic": "s", "partition": "0"}
    assert value("rillet_input_offset", **partition) == 40
    assert value("rillet_input_lag_records", **partition) == 15
    assert value("rillet_consumer_group_offset", topic="s", partition="0") == 40
    assert value("rillet_processed_rows_per_second", query="wc.table-t") == 20.0
    assert value("rillet_batch_duration_seconds_sum", query="wc.table-t") == 0.25
    assert (
        value("rillet_observed_rows_total", query="wc.table-t", metric="dead_letters_in.rows") == 2
    )
