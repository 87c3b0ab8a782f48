"""The Spark conf of an App's run spec (pure): the defaults Rillet gives every App, and the
App's own sparkConf winning over them.

Test plan:
- RocksDB state with changelog checkpointing, the checkpoint file manager, the shuffle
  partitions, the app name and UTC; the App's sparkConf wins;
- tasks wait for no preferred executor unless the App says;
- an idle back-to-back query polls Kafka less often (no other trigger does); the App's own
  polling delay wins;
- the JVMs compile later and collect in parallel unless the App says otherwise, and an App's own
  collector is the only one its JVM is given;
- the JVMs warm up ICU's case mappings only for SQL that changes case.
"""

from __future__ import annotations

import pytest

from rillet.driverapi import runspecs
from rillet.reconcile import sparkdefaults
from tests.unit import wordcount_inputs

_spec = wordcount_inputs.example_run_spec


def test_spark_conf_uses_rocksdb_with_changelog_checkpointing_and_app_conf_wins() -> None:
    spec = _spec("windowed-clicks.yaml")
    conf = sparkdefaults.build_spark_conf(
        spec.model_copy(
            update={
                "spark_conf": {"spark.sql.streaming.stateStore.rocksdb.compactOnCommit": "true"},
            }
        )
    )

    assert conf["spark.sql.streaming.stateStore.providerClass"] == sparkdefaults.ROCKSDB_PROVIDER
    assert conf["spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"] == "true"
    assert (
        conf["spark.sql.streaming.checkpointFileManagerClass"]
        == sparkdefaults.CHECKPOINT_FILE_MANAGER
    )
    assert conf["spark.sql.shuffle.partitions"] == "6"
    assert conf["spark.sql.streaming.stateStore.rocksdb.compactOnCommit"] == "true"
    assert conf["spark.app.name"] == "rillet.default.clicks-per-page"
    assert conf["spark.sql.session.timeZone"] == "UTC"


def test_tasks_wait_for_no_preferred_executor_unless_the_app_says() -> None:
    spec = _spec("windowed-clicks.yaml")

    default = sparkdefaults.build_spark_conf(spec)
    own = sparkdefaults.build_spark_conf(
        spec.model_copy(update={"spark_conf": {"spark.locality.wait": "3s"}})
    )

    assert default["spark.locality.wait"] == "0s"
    assert own["spark.locality.wait"] == "3s"


@pytest.mark.parametrize(
    ("trigger", "delay"),
    [
        (runspecs.TriggerSpec(), sparkdefaults.IDLE_POLLING_DELAY),
        (runspecs.TriggerSpec(processing_time_ms=0), sparkdefaults.IDLE_POLLING_DELAY),
        (runspecs.TriggerSpec(processing_time_ms=100), None),
        (runspecs.TriggerSpec(available_now=True), None),
        (runspecs.TriggerSpec(real_time_ms=300_000), None),
    ],
)
def test_an_idle_back_to_back_query_polls_kafka_less_often(
    trigger: runspecs.TriggerSpec, delay: str | None
) -> None:
    spec = _spec("wordcount.yaml").model_copy(update={"trigger": trigger})

    assert sparkdefaults.build_spark_conf(spec).get(sparkdefaults.POLLING_DELAY) == delay


def test_the_apps_own_polling_delay_wins() -> None:
    spec = _spec("wordcount.yaml")
    own = spec.model_copy(update={"spark_conf": {sparkdefaults.POLLING_DELAY: "10ms"}})

    assert sparkdefaults.build_spark_conf(own)[sparkdefaults.POLLING_DELAY] == "10ms"


def test_jvms_compile_later_and_collect_in_parallel_unless_the_app_says_otherwise() -> None:
    spec = _spec("windowed-clicks.yaml")

    default = sparkdefaults.build_spark_conf(spec)
    own = sparkdefaults.build_spark_conf(
        spec.model_copy(update={"spark_conf": {"spark.driver.defaultJavaOptions": "-Xss4m"}})
    )

    rillets = "-XX:CompileThresholdScaling=3 -XX:+UseParallelGC"
    assert default["spark.driver.defaultJavaOptions"] == rillets
    assert default["spark.executor.defaultJavaOptions"] == rillets
    assert own["spark.driver.defaultJavaOptions"] == "-Xss4m"
    assert own["spark.executor.defaultJavaOptions"] == rillets


def test_an_apps_own_collector_is_the_only_one_its_jvm_is_given() -> None:
    # Two collectors on one command line and the JVM refuses to start.
    spec = _spec("windowed-clicks.yaml")
    conf = {"spark.executor.extraJavaOptions": "-Xss4m -XX:+UseG1GC -XX:MaxGCPauseMillis=50"}

    built = sparkdefaults.build_spark_conf(spec.model_copy(update={"spark_conf": conf}))

    assert built["spark.executor.defaultJavaOptions"] == "-XX:CompileThresholdScaling=3"
    assert built["spark.executor.extraJavaOptions"] == conf["spark.executor.extraJavaOptions"]
    assert built["spark.driver.defaultJavaOptions"].endswith("-XX:+UseParallelGC")


def test_jvms_warm_up_icu_case_mappings_only_for_sql_that_changes_case() -> None:
    icu = "org.apache.spark.sql.catalyst.util.CollationAwareUTF8String"
    wordcount = _spec("wordcount.yaml")  # lower(value)
    assert sparkdefaults.warmup_classes(wordcount) == [icu]
    assert sparkdefaults.build_spark_conf(wordcount)["spark.rillet.warmup.classes"] == icu

    def with_sql(sql: str) -> runspecs.RunSpec:
        return wordcount.model_copy(update={"pipeline": runspecs.PipelineSpec(sql=sql)})

    assert sparkdefaults.warmup_classes(with_sql("SELECT INITCAP (name) AS n FROM s")) == [icu]
    assert sparkdefaults.warmup_classes(with_sql("SELECT lowercase_name, upper_bound FROM s")) == []
    python = wordcount.model_copy(update={"pipeline": runspecs.PipelineSpec(python="m:f")})
    assert sparkdefaults.warmup_classes(python) == []
    assert "spark.rillet.warmup.classes" not in sparkdefaults.build_spark_conf(python)
