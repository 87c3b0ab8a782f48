"""The jars of S3A (s3a:// paths in Spark, for checkpoints in an object store), by coordinates.

One list for both Sparks: the local stack's cache (provisioning.SPARK_S3A, for `rillet run` on
this machine) and the runtime image's images/runtime/s3a-pom.xml, which a unit test keeps equal.

hadoop-aws's POM names the AWS SDK's `bundle` (686 MB); S3A needs only the individual modules
below, at the SDK release hadoop-aws names: those S3AFileSystem loads as it initialises, and
netty-nio-client, which only the transfer manager's async client loads, for copyFromLocalFile.
Without it RocksDB's snapshot upload fails a minute into a query. What these modules depend on
beyond each other, pyspark/jars has (netty, httpclient, commons-codec, slf4j), so the jars are
copied without resolving their POMs. sts (STS, 0.5 MB) is there for EKS's IRSA only: its
web-identity credentials provider loads it.
"""

from __future__ import annotations

from typing import Final

from rillet_devstack import versions

SDK_MODULES: Final = (
    *("s3", "s3-transfer-manager", "netty-nio-client", "apache-client", "sdk-core", "regions"),
    *("auth", "utils", "third-party-jackson-core", "aws-core", "http-auth-aws", "arns"),
    *("aws-xml-protocol", "aws-query-protocol", "protocol-core", "json-utils", "http-client-spi"),
    *("checksums", "checksums-spi", "retries", "retries-spi", "profiles", "http-auth-spi"),
    *("http-auth", "identity-spi", "metrics-spi", "endpoints-spi", "annotations", "utils-lite"),
    "sts",
)

# hadoop-aws, the SDK modules, the accelerated input stream Hadoop 3.5 loads at initialisation
# and its reactive-streams, and Spark's cloud integration for its checkpoint file manager.
ARTIFACTS: Final = (
    ("org.apache.hadoop", "hadoop-aws", versions.HADOOP),
    *(("software.amazon.awssdk", module, versions.AWS_SDK) for module in SDK_MODULES),
    (
        "software.amazon.s3.analyticsaccelerator",
        "analyticsaccelerator-s3",
        versions.S3_ANALYTICS_ACCELERATOR,
    ),
    ("org.reactivestreams", "reactive-streams", versions.REACTIVE_STREAMS),
    (
        "org.apache.spark",
        f"spark-hadoop-cloud_{versions.SCALA_BINARY}",
        versions.SPARK_HADOOP_CLOUD,
    ),
)
