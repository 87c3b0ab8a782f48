"""Building and fetching the stack's artefacts into the version-keyed cache.

Kubernetes (control plane and node components), etcd, helm, CoreDNS, the local-path
provisioner and SeaweedFS are compiled from Go modules (gobuilding); Kafka, the schema registry
and the Spark connectors are fetched from Maven Central (mavenfetching). Each artefact is built
in a scratch directory and renamed into place only when complete, so an interrupted build never
leaves a half-filled cache entry.

A build reports what it is doing through a `Progress` callback (one short line at a time)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rillet.runtime.jvm import CLASS_SHARING, JAR, SOURCES
from rillet_devstack import (
    gobuilding,
    mavenfetching,
    networkpolicies,
    paths,
    reporting,
    versions,
)
from rillet_devstack.commands import run_logged

COMPLETE_MARKER = ".complete"


@dataclass(frozen=True)
class Artefact:
    """One cached thing the stack needs, how to make it, and which tools that takes."""

    name: str
    version: str
    tools: tuple[str, ...]
    build: Callable[
        [Path, Path, reporting.Progress], None
    ]  # (scratch dir, target dir, progress) -> None
    # How many versions to keep, the one in use and those used last (0: all). For artefacts
    # whose version is a machine's state rather than a release: each checkout makes its own.
    keep: int = 0

    @property
    def directory(self) -> Path:
        return paths.cache_dir() / f"{self.name}-v{self.version}"

    @property
    def present(self) -> bool:
        return (self.directory / COMPLETE_MARKER).exists()


def missing(artefacts: Iterable[Artefact]) -> list[Artefact]:
    """The artefacts not yet in the cache."""
    return [artefact for artefact in artefacts if not artefact.present]


def tools_for(artefacts: Iterable[Artefact]) -> set[str]:
    """Every tool needed to build these artefacts."""
    return {tool for artefact in artefacts for tool in artefact.tools}


def provision(artefact: Artefact, progress: reporting.Progress = reporting.no_progress) -> Path:
    """Build the artefact unless cached, reporting how far it got; return its directory."""
    if artefact.present:
        if artefact.keep:  # marked as used: `keep` prunes the versions used least lately
            (artefact.directory / COMPLETE_MARKER).touch()
        return artefact.directory
    scratch = paths.cache_dir() / "build" / f"{artefact.name}-v{artefact.version}"
    target = scratch / "out"
    shutil.rmtree(scratch, ignore_errors=True)
    target.mkdir(parents=True)
    artefact.build(scratch, target, progress)
    (target / COMPLETE_MARKER).write_text(datetime.now(UTC).isoformat())
    shutil.rmtree(artefact.directory, ignore_errors=True)
    artefact.directory.parent.mkdir(parents=True, exist_ok=True)
    target.rename(artefact.directory)
    shutil.rmtree(scratch, ignore_errors=True)
    if artefact.keep:
        for stale in other_versions(artefact)[artefact.keep - 1 :]:
            shutil.rmtree(stale, ignore_errors=True)
    return artefact.directory


def other_versions(artefact: Artefact) -> list[Path]:
    """The artefact's other cached versions, the latest used first."""
    used: dict[Path, float] = {}
    for entry in paths.cache_dir().glob(f"{artefact.name}-v*"):
        with contextlib.suppress(FileNotFoundError):  # incomplete, or pruned meanwhile
            used[entry] = (entry / COMPLETE_MARKER).stat().st_mtime
    used.pop(artefact.directory, None)
    return sorted(used, key=used.__getitem__, reverse=True)


SPARK_CLASSES_FILE = "driver.jsa"


def pyspark_jars() -> Path | None:
    """The jars directory of the pyspark this Python imports, if it has one."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "jars"


def driver_classpath_version(
    jars: Path | None = None, java: str | None = None, warm_up: Path = CLASS_SHARING
) -> str:
    """The cache key of the drivers' class archive: the class path it was made for, and the
    `warm_up` job that chose its classes (runtime.jvm.classsharing).

    A JVM maps a CDS archive only on the class path it was dumped with, each jar at the same
    path with the same size and modification time, and only if it is the same JVM; otherwise it
    ignores the archive with a warning and starts as slowly as without. So an archive fits one
    installation of pyspark (one virtualenv) and one JDK, not a Spark version.
    """
    jars = jars or pyspark_jars() or Path("no-pyspark")
    if java is None:  # as pyspark's launcher finds it (spark-class)
        home = os.environ.get("JAVA_HOME")
        java = f"{home}/bin/java" if home else shutil.which("java") or "no-java"
    digest = hashlib.sha256(versions.SPARK.encode())
    digest.update(warm_up.read_bytes())
    for entry in [Path(java).resolve(), jars, *sorted(jars.glob("*"))]:
        status = entry.stat() if entry.exists() else None
        stamp = (status.st_size, status.st_mtime_ns) if status else None
        digest.update(f"{entry}:{stamp}\n".encode())
    return digest.hexdigest()[:16]


def build_spark_classes(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """A class-data sharing archive of a local Spark driver's classes (runtime.jvm.classsharing),
    with the jars `rillet run` gives it (its warm-up decodes Avro: spark-avro's among them)."""
    from rillet.runtime.jvm import classsharing
    from rillet_devstack import spark

    classsharing.build(target / SPARK_CLASSES_FILE, [str(jar) for jar in spark.spark_jars()])


def jar_version(sources: Sequence[Path] = SOURCES) -> str:
    """The cache key of Rillet's jar: its sources and what they are compiled against."""
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    digest.update(repr((versions.SPARK, mavenfetching.SPARK_KAFKA_ARTIFACTS)).encode())
    return digest.hexdigest()[:16]


def build_jar(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """Compile Rillet's Java (runtime.jvm) against pyspark's jars and the connector's."""
    jars = pyspark_jars()
    if jars is None:
        raise RuntimeError("pyspark is not installed: Rillet's Java compiles against it")
    classpath = f"{jars}/*:{SPARK_KAFKA.directory / 'libs'}/*"
    classes = scratch / "classes"
    progress(f"javac {' '.join(source.name for source in SOURCES)}")
    run_logged(
        ["javac", "--release", "17", "-d", str(classes), "-cp", classpath, *map(str, SOURCES)],
        cwd=scratch,
        log=target / "javac.log",
    )
    with zipfile.ZipFile(target / JAR, "w", zipfile.ZIP_DEFLATED) as jar:
        for compiled in sorted(classes.rglob("*.class")):
            jar.write(compiled, compiled.relative_to(classes).as_posix())


KUBERNETES = Artefact("kubernetes", versions.KUBERNETES, ("go",), gobuilding.build_kubernetes)
KUBERNETES_NODE = Artefact(
    "kubernetes-node", versions.KUBERNETES, ("go",), gobuilding.build_kubernetes_node
)
ETCD = Artefact("etcd", versions.ETCD, ("go",), gobuilding.build_etcd)
HELM = Artefact("helm", versions.HELM, ("go",), gobuilding.build_helm)
COREDNS = Artefact("coredns", versions.COREDNS, ("go",), gobuilding.build_coredns)
LOCAL_PATH = Artefact(
    "local-path-provisioner",
    versions.LOCAL_PATH_PROVISIONER,
    ("go",),
    gobuilding.build_local_path_provisioner,
)
NETWORK_POLICIES = Artefact(
    "kube-network-policies", networkpolicies.version(), ("go",), networkpolicies.build
)
SEAWEEDFS = Artefact("seaweedfs", versions.SEAWEEDFS, ("go",), gobuilding.build_seaweedfs)
KAFKA = Artefact(
    "kafka", f"{versions.KAFKA}-slf4j{versions.SLF4J}", ("mvn", "java"), mavenfetching.fetch_kafka
)
SCHEMA_REGISTRY = Artefact(
    "apicurio-registry", versions.APICURIO_REGISTRY, ("mvn",), mavenfetching.fetch_schema_registry
)
SPARK_KAFKA = Artefact(
    "spark-kafka", versions.SPARK, ("mvn", "java"), mavenfetching.fetch_spark_kafka
)
SPARK_AVRO = Artefact("spark-avro", versions.SPARK, ("mvn", "java"), mavenfetching.fetch_spark_avro)
SPARK_S3A = Artefact(
    "spark-s3a",
    f"{versions.HADOOP}-sdk{versions.AWS_SDK}-cloud{versions.SPARK_HADOOP_CLOUD}",
    ("mvn", "java"),
    mavenfetching.fetch_spark_s3a,
)
# Built by the machine's JDK with the jars a local driver runs with: after SPARK_KAFKA, SPARK_AVRO,
# SPARK_S3A and RILLET_SPARK.
SPARK_CLASSES = Artefact(
    "spark-classes",
    f"{versions.SPARK}-{driver_classpath_version()}",
    ("java",),
    build_spark_classes,
    keep=3,
)
# Compiled by the machine's JDK against pyspark and the connector: after SPARK_KAFKA.
RILLET_SPARK = Artefact("rillet-spark", jar_version(), ("javac",), build_jar)
# The benchmark's alone (bench.pipeline provisions it when it runs).
KAFKA_STREAMS = Artefact(
    "kafka-streams", versions.KAFKA, ("mvn", "java"), mavenfetching.fetch_kafka_streams
)

# Cheap first: a missing tool or an unreachable registry shows before the long Kubernetes builds.
ALL = (
    KAFKA,
    SPARK_KAFKA,
    SPARK_AVRO,
    SPARK_S3A,
    RILLET_SPARK,
    SPARK_CLASSES,
    ETCD,
    HELM,
    LOCAL_PATH,
    COREDNS,
    NETWORK_POLICIES,
    KUBERNETES,
    KUBERNETES_NODE,
)
# Made for a checkout (its sources, its virtualenv), not for the stack: a stack another checkout
# started is reused with these made for this one.
CHECKOUT_ARTEFACTS = (RILLET_SPARK, SPARK_CLASSES)
# Only a stack with a worker node runs these.
NODE_ARTEFACTS = (KUBERNETES_NODE, COREDNS, LOCAL_PATH, NETWORK_POLICIES)
# Only a stack with the object store (`rillet dev up --object-store`), or the schema registry
# (`--schema-registry`): built last, after what every stack needs, so a stack without them never
# waits for them.
OBJECT_STORE_ARTEFACTS = (SEAWEEDFS,)
SCHEMA_REGISTRY_ARTEFACTS = (SCHEMA_REGISTRY,)


def artefacts(
    *, with_node: bool, with_object_store: bool = False, with_schema_registry: bool = False
) -> tuple[Artefact, ...]:
    """What a stack needs, in build order: everything, or all but the worker node's parts; the
    object store's and the registry's after them if it runs them."""
    needed = tuple(a for a in ALL if with_node or a not in NODE_ARTEFACTS)
    needed += OBJECT_STORE_ARTEFACTS if with_object_store else ()
    return needed + (SCHEMA_REGISTRY_ARTEFACTS if with_schema_registry else ())
