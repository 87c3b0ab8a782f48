"""Pinned versions of every component of the local stack, in one place.

A version change here changes the cache key of the artefact, so a new version is built next to
the old one instead of over it.
"""

from __future__ import annotations

KUBERNETES = "1.34.4"
ETCD = "3.6.6"
HELM = "3.21.4"
KAFKA = "4.1.1"
LOG4J = "2.24.3"
# The API log4j-slf4j2-impl binds: Kafka's POM names slf4j-api 1.7, which binds nothing (the
# broker then logged nothing at all: SLF4J's "Defaulting to no-operation (NOP) logger").
SLF4J = "2.0.16"
# The stack's schema registry (Confluent's REST API under /apis/ccompat/v7); needs Java 21+.
APICURIO_REGISTRY = "3.3.3"

# pyspark on PyPI and the connector on Maven Central must be the same Spark release.
SPARK = "4.2.0"
SCALA_BINARY = "2.13"
# The versions the connector's own POM names (spark-parent's kafka.version and
# commons-pool2.version): the connector is linked against them.
SPARK_KAFKA_CLIENTS = "3.9.2"
SPARK_COMMONS_POOL2 = "2.13.1"
# spark-token-provider-kafka-0-10 is published for 4.0.0 only among the 4.x releases this
# machine's Maven Central can serve (the 4.0.1 to 4.2.0 jars are missing there). Its classes
# (Kafka delegation-token and SASL-redaction helpers) are unchanged in substance since 4.0, and
# the integration tests run the connector end to end with it.
SPARK_TOKEN_PROVIDER = "4.0.0"

# S3A (s3a:// checkpoints): hadoop-aws at the Hadoop client pyspark ships (a unit test reads it
# from pyspark/jars), with the AWS SDK v2 modules its POM names at that release instead of the
# SDK's 686 MB `bundle`, and the accelerated input stream Hadoop 3.5 loads at initialisation.
HADOOP = "3.5.0"
AWS_SDK = "2.35.4"
S3_ANALYTICS_ACCELERATOR = "1.3.1"
REACTIVE_STREAMS = "1.0.4"
# Spark's cloud integration (AbortableStreamBasedCheckpointFileManager, the checkpoint file
# manager without rename for S3A): 4.2.0 is not published on Maven Central (4.0.0 to 4.1.2 are).
# 4.1.2's class extends the same AbstractFileContextBasedCheckpointFileManager of spark-sql 4.2.
SPARK_HADOOP_CLOUD = "4.1.2"

# The worker node: cluster DNS and the dynamic PVC provisioner kind ships, both from Go modules.
COREDNS = "1.12.4"
LOCAL_PATH_PROVISIONER = "0.0.30"

# The object store `rillet dev up --object-store` runs (S3 API for checkpoints). SeaweedFS tags no
# module versions: the pseudo-version of a commit on its default branch (`weed version`: 4.53).
SEAWEEDFS = "0.0.0-20261109003541-7506e5f91cd6"

# The base image both Dockerfiles name (images/*/Dockerfile `ARG BASE_IMAGE`): the stack builds it
# from Debian packages (debootstrap) under this very name, so the Dockerfiles are built as written.
DEBIAN_RELEASE = "bookworm"
BASE_IMAGE = "docker.io/library/debian:12.12-slim"
# The pause (sandbox) image of the node's containerd, built from a tiny static C program.
PAUSE_IMAGE = "localhost/rillet/pause:3.10"
