"""Rillet's Spark plugin and session extensions are named only where its jar is on Spark's
class path, after the App's own."""

from __future__ import annotations

from rillet.runtime import jvm

JARS = "/opt/rillet/jars/kafka-clients-3.9.2.jar,/opt/rillet/jars/rillet-spark.jar"


def test_the_plugin_and_the_extensions_are_named_where_the_jar_is_listed() -> None:
    assert jvm.jar_conf({"spark.jars": JARS}) == {
        "spark.plugins": jvm.WARMUP_PLUGIN,
        "spark.sql.extensions": jvm.SESSION_EXTENSIONS,
    }


def test_the_apps_own_plugins_and_extensions_come_first_and_stay() -> None:
    conf = {
        "spark.jars": JARS,
        "spark.plugins": "com.example.Metrics, com.example.Trace",
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    }
    assert jvm.jar_conf(conf) == {
        "spark.plugins": f"com.example.Metrics,com.example.Trace,{jvm.WARMUP_PLUGIN}",
        "spark.sql.extensions": f"io.delta.sql.DeltaSparkSessionExtension,{jvm.SESSION_EXTENSIONS}",
    }


def test_a_class_named_already_is_not_named_twice() -> None:
    conf = {
        "spark.jars": JARS,
        "spark.plugins": jvm.WARMUP_PLUGIN,
        "spark.sql.extensions": jvm.SESSION_EXTENSIONS,
    }
    assert jvm.jar_conf(conf) == {
        "spark.plugins": jvm.WARMUP_PLUGIN,
        "spark.sql.extensions": jvm.SESSION_EXTENSIONS,
    }


def test_a_jar_given_as_a_local_uri_counts() -> None:
    conf = {"spark.jars": "local:///opt/rillet/jars/rillet-spark.jar"}
    assert jvm.jar_conf(conf)["spark.sql.extensions"] == jvm.SESSION_EXTENSIONS


def test_without_the_jar_nothing_is_named() -> None:
    # A JVM that cannot load a plugin's class does not start at all.
    assert jvm.jar_conf({"spark.jars": "/opt/jars/kafka-clients-3.9.2.jar"}) == {}
    assert jvm.jar_conf({}) == {}
    assert jvm.jar_conf({"spark.jars": "/opt/jars/not-rillet-spark.jar"}) == {}
