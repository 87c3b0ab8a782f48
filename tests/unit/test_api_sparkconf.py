"""What an App's sparkConf may hold, and the settings every App runs with (pure).

The refusals themselves (a key per group, unsafe JVM options, another executor account) are rows
of tests/integration/invalid_spark_confs.py, which test_api_validation sends to the models and
test_crds to the apiserver. This module checks the other side.

Test plan:
- what examples, tests and docs put in sparkConf is accepted: tuning, S3A options and IRSA's
  credential chain, executor allocation pace, -XX flags and -Xss, the App's own ServiceAccount
  for its executors;
- the JVM options grammar, both ways, on the flags' edges;
- a key refused for two reasons gets both messages;
- every App runs with SQL over files off and no UI, whatever its sparkConf, in a pod and in
  `rillet run` alike.
"""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
import yaml

from rillet.api.v1alpha1 import apps, appsparkconf, kinds
from rillet.reconcile import manifests, sparkdefaults
from rillet.runtime.driver import localspark
from tests.integration import invalid_cases

WORDCOUNT = Path(__file__).parents[2] / "examples" / "wordcount.yaml"

ACCEPTED = {
    "spark.sql.shuffle.partitions": "12",
    "spark.sql.adaptive.enabled": "false",
    "spark.locality.wait": "3s",
    "spark.sql.streaming.stateStore.rocksdb.compactOnCommit": "true",
    "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
    "spark.hadoop.fs.s3a.aws.credentials.provider": "software.amazon.awssdk.auth.credentials."
    "WebIdentityTokenFileCredentialsProvider",
    "spark.kubernetes.allocation.batch.size": "4",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    "spark.executor.extraJavaOptions": "-Xss4m -XX:+UseG1GC -XX:MaxGCPauseMillis=50",
    "spark.kubernetes.executor.serviceAccountName": "wordcount-driver",
}


def test_what_users_set_today_is_accepted() -> None:
    app = kinds.parse(invalid_cases.app({"sparkConf": ACCEPTED}))

    assert isinstance(app, apps.App)
    assert app.spec.spark_conf == ACCEPTED


@pytest.mark.parametrize(
    ("options", "fits"),
    [
        ("-XX:+UseParallelGC", True),
        ("  -XX:-UseCompressedOops   -XX:MaxRAMPercentage=75.0 ", True),
        ("-Xss512k", True),
        ("-XX:+ExitOnOutOfMemoryError", True),
        ("", False),
        ("-XX:OnError=sh", False),
        ("-XX:SharedArchiveFile=/tmp/a.jsa", False),
        ("-Duser.timezone=UTC", False),
        ("-XX:+UseG1GC\t-javaagent:/a.jar", False),
        ("-XX:+UseG1GC\n", False),
        ("-cp /tmp", False),
        ("-Xmx4g", False),
    ],
)
def test_java_options_are_xx_flags_and_stack_size_only(options: str, fits: bool) -> None:
    assert appsparkconf.java_options_fit(options) is fits


def test_a_key_refused_for_two_reasons_gets_both() -> None:
    key = "spark.ssl.keyPassword"
    with pytest.raises(pydantic.ValidationError) as refused:
        kinds.parse(invalid_cases.app({"sparkConf": {key: "x"}}))

    assert appsparkconf.refusals(key) == [appsparkconf.SECURITY, appsparkconf.SECRETS]
    for group in (appsparkconf.SECURITY, appsparkconf.SECRETS):
        assert f"sparkConf sets {key}, {group.advice}" in str(refused.value)


def test_every_app_runs_without_sql_over_files_nor_ui_whatever_its_conf() -> None:
    documents = list(yaml.safe_load_all(WORDCOUNT.read_text(encoding="utf-8")))
    spec = manifests.build_run_spec_from_manifests(
        documents, bootstrap_servers="kafka:9092", checkpoint_location="/ck/app"
    )
    # A run spec that bypassed the API's checks still runs with them.
    forced = spec.model_copy(
        update={"spark_conf": {"spark.sql.runSQLOnFiles": "true", "spark.ui.enabled": "true"}}
    )

    for conf in (sparkdefaults.build_spark_conf(spec), sparkdefaults.build_spark_conf(forced)):
        assert conf["spark.sql.runSQLOnFiles"] == "false"
        assert conf["spark.ui.enabled"] == "false"
    assert all(appsparkconf.is_reserved(key) for key in sparkdefaults.SECURITY_DEFAULTS)
    assert localspark.local_spark_conf(jars=[], master="local[2]")["spark.ui.enabled"] == "false"
