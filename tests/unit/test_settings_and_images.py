"""Operator settings keep secrets secret; the runtime image's connector pom follows versions.py.

Test plan:
- the SASL password is read from the environment, hidden in repr/str/JSON dumps, and handed
  only to the Kafka client config.
- the namespace list is split from one comma-separated variable; it counts as listed (the
  chart grants a Role in each) only when every entry is a name, not a glob or an exclusion.
- images/runtime/connector-pom.xml pins exactly the connector jars the local stack uses, and
  images/runtime/s3a-pom.xml exactly its S3A jars.
- hadoop-aws is the Hadoop release of pyspark's own Hadoop client jars (S3A is compiled against
  it); the S3A set is the individual AWS SDK modules, including those that fail only late when
  missing (netty-nio-client: RocksDB snapshot upload), never the SDK's 686 MB bundle.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rillet.settings import KafkaSettings, OperatorSettings
from rillet_devstack import mavenfetching, provisioning, s3ajars

REPO = Path(__file__).resolve().parents[2]


def test_password_never_shows_outside_the_client_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RILLET_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("RILLET_KAFKA_SASL_USERNAME", "app")
    monkeypatch.setenv("RILLET_KAFKA_SASL_PASSWORD", "hunter2-very-secret")
    settings = KafkaSettings()
    for rendering in (repr(settings), str(settings), settings.model_dump_json()):
        assert "hunter2-very-secret" not in rendering
    assert settings.client_config()["sasl.password"] == "hunter2-very-secret"
    assert settings.client_config()["sasl.mechanism"] == "SCRAM-SHA-512"


def test_the_kafka_login_is_read_from_a_mounted_secrets_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "username").write_text("operator\n")
    (tmp_path / "password").write_text("hunter2-from-a-file\n")
    monkeypatch.setenv("RILLET_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("RILLET_KAFKA_CREDENTIALS_DIR", str(tmp_path))
    config = KafkaSettings().client_config()
    assert (config["sasl.username"], config["sasl.password"]) == ("operator", "hunter2-from-a-file")
    # A login set directly (an operator run by hand) wins over the files.
    monkeypatch.setenv("RILLET_KAFKA_SASL_USERNAME", "app")
    monkeypatch.setenv("RILLET_KAFKA_SASL_PASSWORD", "hunter2-very-secret")
    assert KafkaSettings().client_config()["sasl.username"] == "app"


def test_namespaces_split_from_one_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RILLET_NAMESPACES", "team-a, team-*")
    assert OperatorSettings().namespaces == ["team-a", "team-*"]


@pytest.mark.parametrize(
    ("namespaces", "listed"),
    [
        ("team-a,team-b", ("team-a", "team-b")),
        ("", ()),
        ("team-a,team-*", ()),
        ("team-?", ()),
        ("!kube-system", ()),
    ],
)
def test_namespaces_listed_only_when_all_are_names(
    monkeypatch: pytest.MonkeyPatch, namespaces: str, listed: tuple[str, ...]
) -> None:
    monkeypatch.setenv("RILLET_NAMESPACES", namespaces)
    assert OperatorSettings().listed_namespaces == listed


def test_runtime_image_connector_pom_matches_versions() -> None:
    expected = mavenfetching.maven_copy_pom(mavenfetching.CONNECTOR_ARTIFACTS, "${outputDirectory}")
    assert (REPO / "images/runtime/connector-pom.xml").read_text() == expected


def test_runtime_image_s3a_pom_matches_versions() -> None:
    expected = mavenfetching.maven_copy_pom(s3ajars.ARTIFACTS, "${outputDirectory}")
    assert (REPO / "images/runtime/s3a-pom.xml").read_text() == expected


def test_hadoop_aws_is_pysparks_hadoop_release() -> None:
    jars = provisioning.pyspark_jars()
    assert jars is not None
    (client,) = jars.glob("hadoop-client-api-*.jar")
    hadoop = client.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    versions_by_artifact = {a: v for _, a, v in s3ajars.ARTIFACTS}
    assert versions_by_artifact["hadoop-aws"] == hadoop


def test_s3a_jars_are_sdk_modules_with_the_late_failing_ones() -> None:
    artifacts = {(g, a) for g, a, _ in s3ajars.ARTIFACTS}
    sdk = "software.amazon.awssdk"
    # Each of these is loaded by S3AFileSystem.initialize, or (netty-nio-client) by
    # copyFromLocalFile only: a query without it fails after a minute, at its first snapshot.
    for module in ("s3", "s3-transfer-manager", "aws-query-protocol", "netty-nio-client"):
        assert (sdk, module) in artifacts
    assert ("software.amazon.s3.analyticsaccelerator", "analyticsaccelerator-s3") in artifacts
    assert ("org.apache.spark", "spark-hadoop-cloud_2.13") in artifacts
    assert (sdk, "bundle") not in artifacts
    # STS: EKS's IRSA (web identity) credentials, as the checkpoint's docs say.
    assert (sdk, "sts") in artifacts
    # One release of the SDK: 32 jars for S3A itself, STS and Spark's cloud integration.
    assert {v for g, _, v in s3ajars.ARTIFACTS if g == sdk} == {"2.35.4"}
    assert len(artifacts) == 34
