"""Fetching from Maven Central: Kafka, the schema registry, Kafka Streams and the Spark
connector jars, each into an artefact's directory (provisioning caches it). Two kinds of pom: one
that resolves dependencies with their own (Kafka), one that copies exactly the jars named
(Spark's connectors, whose parent POM names repositories this machine cannot reach)."""

from __future__ import annotations

import tarfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from rillet_devstack import reporting, s3ajars, versions
from rillet_devstack.commands import run_logged


def _pom(artifact_id: str, body: str) -> str:
    """A packaging-pom project of rillet.devstack: one of the poms below, their body inside."""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>rillet.devstack</groupId>
  <artifactId>{artifact_id}</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
{body}</project>
"""


def _coordinates(tag: str, indent: str, artifacts: Iterable[tuple[str, str, str]]) -> str:
    """One `<tag>` line per (group, artifact, version)."""
    return "\n".join(
        f"{indent}<{tag}><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></{tag}>"
        for g, a, v in artifacts
    )


def maven_pom(dependencies: Iterable[tuple[str, str, str]]) -> str:
    """A packaging-pom project whose only purpose is to resolve these (group, artifact, version)."""
    deps = _coordinates("dependency", "    ", dependencies)
    return _pom(
        "fetch",
        f"""  <dependencies>
{deps}
  </dependencies>
""",
    )


def _copy_maven_dependencies(
    scratch: Path, target: Path, dependencies: list[tuple[str, str, str]]
) -> None:
    (scratch / "pom.xml").write_text(maven_pom(dependencies))
    run_logged(
        [
            "mvn",
            "-B",
            "-q",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={target / 'libs'}",
        ],
        cwd=scratch,
        log=target / "fetch.log",
    )


def fetch_kafka(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """The Kafka broker, its tools and a log4j2 binding with the SLF4J API it binds (neither
    in Kafka's POM)."""
    kafka, log4j = versions.KAFKA, versions.LOG4J
    _copy_maven_dependencies(
        scratch,
        target,
        [
            ("org.apache.kafka", "kafka_2.13", kafka),
            ("org.apache.kafka", "kafka-tools", kafka),
            ("org.apache.logging.log4j", "log4j-api", log4j),
            ("org.apache.logging.log4j", "log4j-core", log4j),
            ("org.apache.logging.log4j", "log4j-slf4j2-impl", log4j),
            ("org.slf4j", "slf4j-api", versions.SLF4J),
        ],
    )


def fetch_schema_registry(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """Apicurio Registry's server (a Quarkus application: its `-all` archive holds the launcher
    jar and its libraries) into target/registry."""
    artifact = f"io.apicurio:apicurio-registry-app:{versions.APICURIO_REGISTRY}:tar.gz:all"
    run_logged(
        [
            "mvn",
            "-B",
            "-q",
            "dependency:copy",
            f"-Dartifact={artifact}",
            f"-DoutputDirectory={scratch}",
        ],
        cwd=scratch,
        log=target / "fetch.log",
    )
    (archive,) = scratch.glob("apicurio-registry-app-*.tar.gz")
    progress(f"unpack {archive.name}")
    with tarfile.open(archive) as packed:
        packed.extractall(target / "registry", filter="data")


def fetch_kafka_streams(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """Kafka Streams at the broker's version and its runtime dependencies (RocksDB), for the
    benchmark's peer row (bench/pipeline/): no stack needs it."""
    _copy_maven_dependencies(
        scratch, target, [("org.apache.kafka", "kafka-streams", versions.KAFKA)]
    )


def maven_copy_pom(artifacts: Iterable[tuple[str, str, str]], output: Path | str) -> str:
    """A pom whose `dependency:copy` copies exactly these jars, resolving none of their POMs'
    dependencies (Spark's parent POM names repositories this machine cannot reach)."""
    items = _coordinates("artifactItem", "          ", artifacts)
    return _pom(
        "copy",
        f"""  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>3.8.1</version>
        <configuration>
          <outputDirectory>{output}</outputDirectory>
          <artifactItems>
{items}
          </artifactItems>
        </configuration>
      </plugin>
    </plugins>
  </build>
""",
    )


# The four jars Spark's Kafka source and sink need beyond what pyspark ships (also the runtime
# image's images/runtime/connector-pom.xml, which a unit test keeps equal).
SPARK_KAFKA_ARTIFACTS = (
    ("org.apache.spark", f"spark-sql-kafka-0-10_{versions.SCALA_BINARY}", versions.SPARK),
    (
        "org.apache.spark",
        f"spark-token-provider-kafka-0-10_{versions.SCALA_BINARY}",
        versions.SPARK_TOKEN_PROVIDER,
    ),
    ("org.apache.kafka", "kafka-clients", versions.SPARK_KAFKA_CLIENTS),
    ("org.apache.commons", "commons-pool2", versions.SPARK_COMMONS_POOL2),
)
# Spark's Avro functions (from_avro, to_avro): one jar, its dependencies are pyspark's own.
SPARK_AVRO_ARTIFACTS = (
    ("org.apache.spark", f"spark-avro_{versions.SCALA_BINARY}", versions.SPARK),
)
# Every connector jar the runtime image carries (images/runtime/connector-pom.xml).
CONNECTOR_ARTIFACTS = SPARK_KAFKA_ARTIFACTS + SPARK_AVRO_ARTIFACTS


def _maven_copy(artifacts: Sequence[tuple[str, str, str]], target: Path, scratch: Path) -> None:
    """Copy exactly these jars into target/libs, resolving none of their POMs' dependencies."""
    (scratch / "pom.xml").write_text(maven_copy_pom(artifacts, target / "libs"))
    run_logged(["mvn", "-B", "-q", "dependency:copy"], cwd=scratch, log=target / "fetch.log")


def fetch_spark_kafka(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """The Spark-Kafka connector jars."""
    _maven_copy(SPARK_KAFKA_ARTIFACTS, target, scratch)


def fetch_spark_avro(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """Spark's Avro jar."""
    _maven_copy(SPARK_AVRO_ARTIFACTS, target, scratch)


def fetch_spark_s3a(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """The S3A jars (s3a:// paths in Spark)."""
    _maven_copy(s3ajars.ARTIFACTS, target, scratch)
