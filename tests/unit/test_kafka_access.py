"""Per-App Kafka principals, the pure parts: grants, the driver's login, what Kafka's refusal says.

Test plan:
- grants: READ on every Topic and Table input, DESCRIBE_CONFIGS on stream inputs, WRITE on
  outputs and a dead-letter Topic, the App's group and `<group>.` prefixes; an external input
  and a dead-letter topicName are not granted; App `a`'s prefixes do not cover App `ab`;
- the plan creates what is missing and deletes what is no longer wanted, and is empty when the
  principal holds exactly the grants;
- with App principals on: the driver mounts Secret `<app>-kafka` read-only (no env var, no
  value in the ConfigMap), the run spec says how to log in, the Secret is built without data;
  off: none of it;
- the operator refuses App principals unless it logs in with SASL/SCRAM;
- the driver's login: librdkafka credentials from the mounted files, renamed for the Java client
  (JAAS, PEM truststore inline), and never in the spec's repr; a missing file names the file;
- a failure that is Kafka refusing the principal (Java's and librdkafka's wording) becomes
  KafkaAccessDenied naming the principal and the refused topics; another failure is no refusal;
- the App's status: KafkaAccessDenied from the driver is Stalled; Kafka unreachable while
  provisioning is Reconciling, Kafka refusing the operator Stalled.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from rillet.api.v1alpha1 import apps
from rillet.driverapi import runspecs
from rillet.reconcile import (
    appobservations,
    appresolving,
    appstatus,
    kafkaaccess,
    manifests,
    runresolving,
)
from rillet.reconcile.appobjects import building, contexts
from rillet.reconcile.kafkaaccess import Grant
from rillet.runtime.queries import kafkalogin
from rillet.settings import AppSettings, KafkaSettings

UID = "7d3c0a8e-0000-4000-8000-000000000002"
CLUSTER = "5f2b9c01"
LOGIN = runspecs.KafkaLogin(
    security_protocol="SASL_SSL",
    sasl_mechanism="SCRAM-SHA-512",
    credentials_dir=kafkaaccess.CREDENTIALS_DIR,
    ca=True,
)

DOCUMENTS = """
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: orders}
spec: {partitions: 3, topicName: shop.orders}
---
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: rejects}
spec: {partitions: 1}
---
apiVersion: rillet.io/v1alpha1
kind: Table
metadata: {name: prices}
spec: {keyFormat: string, valueFormat: json, valueSchema: "sku STRING, price DOUBLE"}
---
apiVersion: rillet.io/v1alpha1
kind: Table
metadata: {name: totals}
spec: {keyFormat: string, valueFormat: json, valueSchema: "sku STRING, total DOUBLE"}
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata: {name: billing, namespace: shop, uid: UID, generation: 1}
spec:
  image: rillet/spark-runtime:0.1.0
  inputs:
    - {name: orders, topicRef: {name: orders}, format: json, schema: "sku STRING, n INT"}
    - {name: prices, tableRef: {name: prices}}
    - {name: audit, external: {topicName: finance.audit}, format: string}
  pipeline: {sql: "SELECT sku, sum(n) AS total FROM orders GROUP BY sku"}
  outputs:
    - {tableRef: {name: totals}, keyColumns: [sku]}
  deadLetterTopic: {topicRef: {name: rejects}}
"""


def _app_and_run_spec(
    text: str = DOCUMENTS, login: runspecs.KafkaLogin | None = None
) -> tuple[apps.App, runspecs.RunSpec]:
    found = manifests.parse_manifests(yaml.safe_load_all(text.replace("UID", UID)))
    app = found.apps["billing"]
    run_spec = runresolving.build_run_spec(
        app,
        topics_by_name=found.topics,
        tables_by_name=found.tables,
        bootstrap_servers="kafka:9093",
        checkpoint_location="/ck",
        kafka_login=login,
    )
    return app, run_spec


def test_an_app_is_granted_what_its_spec_reads_and_writes_and_nothing_else() -> None:
    group = "rillet.shop.billing"
    assert kafkaaccess.grants(*_app_and_run_spec()) == {
        Grant("TOPIC", "shop.orders", "LITERAL", "READ"),
        Grant("TOPIC", "shop.orders", "LITERAL", "DESCRIBE_CONFIGS"),
        Grant("TOPIC", "prices", "LITERAL", "READ"),
        Grant("TOPIC", "totals", "LITERAL", "WRITE"),
        Grant("TOPIC", "rejects", "LITERAL", "WRITE"),
        Grant("GROUP", group, "LITERAL", "READ"),
        Grant("GROUP", f"{group}.", "PREFIXED", "READ"),
        Grant("TRANSACTIONAL_ID", f"{group}.", "PREFIXED", "WRITE"),
    }


def test_an_exactly_once_output_may_also_read_its_topic_for_its_markers() -> None:
    text = DOCUMENTS.replace(
        "deadLetterTopic: {topicRef: {name: rejects}}",
        "deadLetterTopic: {topicRef: {name: rejects}, delivery: ExactlyOnce}",
    )
    granted = kafkaaccess.grants(*_app_and_run_spec(text))
    assert Grant("TOPIC", "rejects", "LITERAL", "READ") in granted
    assert Grant("TOPIC", "totals", "LITERAL", "READ") not in granted  # a Table: at-least-once


def test_an_external_dead_letter_topic_is_not_granted() -> None:
    text = DOCUMENTS.replace("{topicRef: {name: rejects}}", "{topicName: ops.rejects}")
    granted = {g.name for g in kafkaaccess.grants(*_app_and_run_spec(text))}
    assert "ops.rejects" not in granted
    assert "finance.audit" not in granted


def test_one_apps_prefixes_do_not_cover_an_app_whose_name_extends_it() -> None:
    prefixes = {g.name for g in kafkaaccess.grants(*_app_and_run_spec()) if g.pattern == "PREFIXED"}
    assert prefixes == {"rillet.shop.billing."}
    for other in ("rillet.shop.billing2", "rillet.shop.billing2.spark-1f2e"):
        assert not any(other.startswith(prefix) for prefix in prefixes)


def test_the_plan_creates_the_missing_and_deletes_the_unwanted_grants() -> None:
    kept = Grant("TOPIC", "a", "LITERAL", "READ")
    gone = Grant("TOPIC", "old", "LITERAL", "WRITE")
    new = Grant("TOPIC", "b", "LITERAL", "WRITE")
    plan = kafkaaccess.plan_grants([kept, gone], [kept, new])
    assert (plan.create, plan.delete) == ((new,), (gone,))
    assert kafkaaccess.plan_grants([kept], [kept]).empty


def _objects(login: runspecs.KafkaLogin | None) -> building.AppObjects:
    env = contexts.AppEnvironment(
        kafka_bootstrap="kafka:9093", kafka_login=login, kafka_cluster=CLUSTER
    )
    return building.build_app_objects(*_app_and_run_spec(login=login), env)


def test_with_app_principals_the_driver_mounts_the_apps_secret_and_no_secret_is_shown() -> None:
    objects = _objects(LOGIN)
    pod = objects.stateful_set["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["kafka-credentials"]["secret"] == {
        "secretName": "billing-kafka",
        "defaultMode": 0o440,
    }
    container = pod["containers"][0]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["kafka-credentials"] == {
        "name": "kafka-credentials",
        "mountPath": "/etc/rillet/kafka",
        "readOnly": True,
    }
    assert not [e for e in container["env"] if "SASL" in e["name"] or "PASSWORD" in e["name"]]
    run_spec = json.loads(objects.config_map["data"]["run-spec.json"])
    assert run_spec["kafka_login"] == LOGIN.model_dump(mode="json")
    assert "sasl.password" not in json.dumps(objects.config_map)

    access = objects.kafka_access
    assert access is not None
    assert access.user == f"rillet.{CLUSTER}.shop.billing"
    assert access.secret["metadata"]["name"] == "billing-kafka"
    assert access.secret["metadata"]["ownerReferences"][0]["uid"] == UID
    assert "data" not in access.secret


def test_without_app_principals_there_is_no_secret_mount_and_no_login() -> None:
    objects = _objects(None)
    pod = objects.stateful_set["spec"]["template"]["spec"]
    assert "kafka-credentials" not in {v["name"] for v in pod["volumes"]}
    assert objects.kafka_access is None
    assert "kafka_login" not in json.loads(objects.config_map["data"]["run-spec.json"])


def test_app_principals_need_the_operator_to_log_in_with_scram() -> None:
    on = AppSettings(kafka_principals=True)
    with pytest.raises(ValueError, match="SASL/SCRAM"):
        appresolving.kafka_login(on, KafkaSettings(security_protocol="SSL"))
    with pytest.raises(ValueError, match="SASL/SCRAM"):
        appresolving.kafka_login(
            on, KafkaSettings(security_protocol="SASL_SSL", sasl_mechanism="PLAIN")
        )
    scram = KafkaSettings(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512")
    assert appresolving.kafka_login(on, scram) == LOGIN.model_copy(update={"ca": False})
    assert appresolving.kafka_login(AppSettings(), scram) is None


CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _mounted(directory: Path) -> runspecs.RunSpec:
    (directory / "username").write_text("rillet.shop.billing")
    (directory / "password").write_text('s3cr3t-"pass\\word"\n')
    (directory / "ca.crt").write_text(
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    )
    login = LOGIN.model_copy(update={"credentials_dir": str(directory)})
    return kafkalogin.with_credentials(_app_and_run_spec(login=login)[1])


def test_the_driver_logs_in_with_the_mounted_credentials_in_both_clients(tmp_path: Path) -> None:
    spec = _mounted(tmp_path)
    assert spec.kafka_config == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "rillet.shop.billing",
        "sasl.password": 's3cr3t-"pass\\word"',
        "ssl.ca.pem": CA.strip(),
    }
    assert kafkalogin.java_client_config(spec.kafka_config) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="rillet.shop.billing" password="s3cr3t-\\"pass\\\\word\\"";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": spec.kafka_config["ssl.ca.pem"],
    }
    assert "s3cr3t" not in repr(spec)


def test_a_missing_credentials_file_is_named_without_any_content(tmp_path: Path) -> None:
    login = LOGIN.model_copy(update={"credentials_dir": str(tmp_path)})
    with pytest.raises(ValueError, match=f"{tmp_path}/username"):
        kafkalogin.with_credentials(_app_and_run_spec(login=login)[1])


@pytest.mark.parametrize(
    "failure",
    [
        "[STREAM_FAILED] Query terminated with exception: "
        "org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access "
        "topics: [finance.audit]",
        'KafkaException: KafkaError{code=TOPIC_AUTHORIZATION_FAILED,val=29,str="Broker: Topic '
        'authorization failed"}',
        "org.apache.kafka.common.errors.TopicAuthorizationException: Authorization failed.",
    ],
)
def test_kafka_refusing_the_principal_is_access_denied_naming_it_and_the_topics(
    tmp_path: Path, failure: str
) -> None:
    assert kafkalogin.is_refusal(failure)
    spec = _mounted(tmp_path)
    message = kafkalogin.access_denied(failure, spec, ["finance.audit"])
    assert message.startswith(
        "KafkaAccessDenied: Kafka refused principal User:rillet.shop.billing access to topics "
        "[finance.audit] (TOPIC_AUTHORIZATION_FAILED)."
    )
    if "[finance.audit]" in failure:
        assert "topics [finance.audit]" in kafkalogin.access_denied(failure, spec, [])
    assert not kafkalogin.is_refusal("AnalysisException: no such column")


def _standing(**observed: Any) -> appstatus.Standing:
    return appstatus.derive_standing(appobservations.AppObservation(generation=1, **observed))


def test_the_status_says_whether_kafka_refused_the_app_or_the_operator() -> None:
    denied = appobservations.DriverObservation(
        phase="Running",
        restart_count=1,
        last_exit_code=1,
        last_message="KafkaAccessDenied: Kafka refused principal User:rillet.shop.billing ...",
    )
    verdict = _standing(driver=denied).verdict
    assert (verdict.state, verdict.reason) == ("stalled", "KafkaAccessDenied")
    assert verdict.message.startswith("Kafka refused principal User:rillet.shop.billing")

    waiting = _standing(blocking_problem=("KafkaUnavailable", "Kafka is unreachable")).verdict
    assert (waiting.state, waiting.reason) == ("progressing", "KafkaUnavailable")
    refused = _standing(blocking_problem=("KafkaAccessNotGranted", "CLUSTER_AUTHORIZATION")).verdict
    assert (refused.state, refused.reason) == ("stalled", "KafkaAccessNotGranted")
    conditions = appstatus.derive_conditions(
        _standing(driver=denied), generation=1, previous=(), now=datetime.now(UTC)
    )
    assert {c["type"]: c["status"] for c in conditions}["Stalled"] == "True"


def test_the_names_of_exactly_once_writes_fall_under_the_apps_granted_prefixes() -> None:
    from rillet.runtime.queries import transactions  # pyspark: imported by this test alone

    app, run_spec = _app_and_run_spec()
    granted = kafkaaccess.grants(app, run_spec)
    sink = transactions.TransactionalSink(
        config={}, topic="totals", prefix=f"{run_spec.consumer_group}.topic-totals", partitions=4
    )

    def allowed(kind: str, name: str) -> bool:
        return any(
            g.resource_type == kind and g.pattern == "PREFIXED" and name.startswith(g.name)
            for g in granted
        )

    assert allowed("TRANSACTIONAL_ID", sink.transactional_id(3))
    assert allowed("GROUP", sink.marker_group(3))
    assert sink.transactional_id(3) != sink.marker_group(3)


def test_an_exactly_once_sinks_repr_never_shows_its_login() -> None:
    from rillet.runtime.queries import transactions  # pyspark: imported by this test alone

    sink = transactions.TransactionalSink(
        config={"sasl.jaas.config": 'ScramLoginModule required password="s3cret";'},
        topic="totals",
        prefix="rillet.default.app.topic-totals",
        partitions=4,
    )

    assert "s3cret" not in repr(sink)
    assert "totals" in repr(sink)
