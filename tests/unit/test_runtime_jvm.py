"""Rillet's Spark plugin is named only where its jar is on Spark's class path."""

from __future__ import annotations

from rillet.runtime import jvm

JARS = "/opt/rillet/jars/kafka-clients-3.9.2.jar,/opt/rillet/jars/rillet-spark.jar"


def test_the_warm_up_plugin_runs_where_the_jar_is_listed() -> None:
    assert jvm.plugin_conf({"spark.jars": JARS}) == {"spark.plugins": jvm.WARMUP_PLUGIN}


def test_the_apps_own_plugins_come_first_and_stay() -> None:
    conf = {"spark.jars": JARS, "spark.plugins": "com.example.Metrics, com.example.Trace"}
    assert jvm.plugin_conf(conf) == {
        "spark.plugins": f"com.example.Metrics,com.example.Trace,{jvm.WARMUP_PLUGIN}"
    }


def test_a_plugin_named_already_is_not_named_twice() -> None:
    conf = {"spark.jars": JARS, "spark.plugins": jvm.WARMUP_PLUGIN}
    assert jvm.plugin_conf(conf) == {"spark.plugins": jvm.WARMUP_PLUGIN}


def test_without_the_jar_no_plugin_is_named() -> None:
    # A JVM that cannot load a plugin's class does not start at all.
    assert jvm.plugin_conf({"spark.jars": "/opt/jars/kafka-clients-3.9.2.jar"}) == {}
    assert jvm.plugin_conf({}) == {}
    assert jvm.plugin_conf({"spark.jars": "/opt/jars/not-rillet-spark.jar"}) == {}
