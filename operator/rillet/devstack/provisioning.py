"""Building and fetching the stack's artefacts into the version-keyed cache.

Kubernetes, etcd and helm are compiled from Go modules; Kafka and the Spark-Kafka connector are
resolved from Maven Central. Each artefact is built in a scratch directory and renamed into place
only when complete, so an interrupted build never leaves a half-filled cache entry.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rillet.devstack import paths, versions
from rillet.devstack.commands import run_logged

COMPLETE_MARKER = ".complete"


@dataclass(frozen=True)
class Artefact:
    """One cached thing the stack needs, how to make it, and which tools that takes."""

    name: str
    version: str
    tools: tuple[str, ...]
    build: Callable[[Path, Path], None]  # (scratch dir, target dir) -> None

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


def provision(artefact: Artefact) -> Path:
    """Build the artefact unless cached; return its directory."""
    if artefact.present:
        return artefact.directory
    scratch = paths.cache_dir() / "build" / f"{artefact.name}-v{artefact.version}"
    target = scratch / "out"
    shutil.rmtree(scratch, ignore_errors=True)
    target.mkdir(parents=True)
    artefact.build(scratch, target)
    (target / COMPLETE_MARKER).write_text(datetime.now(UTC).isoformat())
    shutil.rmtree(artefact.directory, ignore_errors=True)
    artefact.directory.parent.mkdir(parents=True, exist_ok=True)
    target.rename(artefact.directory)
    shutil.rmtree(scratch, ignore_errors=True)
    return artefact.directory


# --- Go builds -------------------------------------------------------------------------------

# Never let the go command download another toolchain: the machine's Go must do.
GO_ENV = {"GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}


def kubernetes_version_ldflags(version: str) -> str:
    """Version stamps for component-base and client-go, so /version reports the pinned release."""
    major, minor, _ = version.split(".")
    stamps = {
        "gitVersion": f"v{version}",
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "gitCommit": "0000000000000000000000000000000000000000",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    packages = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
    return " ".join(f"-X {pkg}.{key}={value}" for pkg in packages for key, value in stamps.items())


def staging_modules(kubernetes_go_mod: str) -> list[str]:
    """The k8s.io staging modules that k8s.io/kubernetes requires at v0.0.0 (replaced locally)."""
    return sorted(set(re.findall(r"^\s+(k8s\.io/[\w.-]+) v0\.0\.0$", kubernetes_go_mod, re.M)))


def _go_wrapper_module(scratch: Path, log: Path) -> Path:
    module = scratch / "module"
    module.mkdir()
    run_logged(
        ["go", "mod", "init", "rillet.local/devstack-build"], cwd=module, log=log, env=GO_ENV
    )
    return module


def build_kubernetes(scratch: Path, target: Path) -> None:
    """kube-apiserver and kube-controller-manager from the k8s.io/kubernetes module.

    k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with local paths,
    which a dependent module cannot use: a wrapper module replaces each with its published v0.N.P.
    """
    version = versions.KUBERNETES
    log = target / "build.log"
    module = _go_wrapper_module(scratch, log)
    download = subprocess.run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@v{version}"],
        cwd=module,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **GO_ENV},
    )
    go_mod = Path(json.loads(download.stdout)["GoMod"]).read_text()
    staging_version = "v0." + version.split(".", 1)[1]
    edits = [f"-require=k8s.io/kubernetes@v{version}"] + [
        f"-replace={m}={m}@{staging_version}" for m in staging_modules(go_mod)
    ]
    run_logged(["go", "mod", "edit", *edits], cwd=module, log=log, env=GO_ENV)
    commands = [f"k8s.io/kubernetes/cmd/{c}" for c in ("kube-apiserver", "kube-controller-manager")]
    run_logged(
        ["go", "get", *[f"{c}@v{version}" for c in commands]], cwd=module, log=log, env=GO_ENV
    )
    ldflags = f"-s -w {kubernetes_version_ldflags(version)}"
    for command in commands:
        out = target / command.rsplit("/", 1)[1]
        run_logged(
            ["go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, command],
            cwd=module,
            log=log,
            env=GO_ENV,
        )


def build_etcd(scratch: Path, target: Path) -> None:
    """etcd's server from go.etcd.io/etcd/server/v3 (its main package), through a wrapper module."""
    log = target / "build.log"
    module = _go_wrapper_module(scratch, log)
    package = "go.etcd.io/etcd/server/v3"
    run_logged(["go", "get", f"{package}@v{versions.ETCD}"], cwd=module, log=log, env=GO_ENV)
    run_logged(
        ["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", target / "etcd", package],
        cwd=module,
        log=log,
        env=GO_ENV,
    )


def helm_ldflags(helm_version: str, kubernetes_version: str) -> str:
    """Helm's own version, and the Kubernetes version offline `helm template`/`lint` assume."""
    major, minor, _ = kubernetes_version.split(".")
    flags = [f"-X helm.sh/helm/v3/internal/version.version=v{helm_version}"]
    for package in ("helm.sh/helm/v3/pkg/lint/rules", "helm.sh/helm/v3/pkg/chartutil"):
        flags += [f"-X {package}.k8sVersionMajor={major}", f"-X {package}.k8sVersionMinor={minor}"]
    return " ".join(flags)


def build_helm(scratch: Path, target: Path) -> None:
    """The helm CLI, `go install`ed at the pinned release (helm has no replace directives)."""
    log = target / "build.log"
    run_logged(
        [
            "go",
            "install",
            "-trimpath",
            "-ldflags",
            f"-s -w {helm_ldflags(versions.HELM, versions.KUBERNETES)}",
            f"helm.sh/helm/v3/cmd/helm@v{versions.HELM}",
        ],
        cwd=scratch,
        log=log,
        env={**GO_ENV, "GOBIN": str(target), "GOFLAGS": ""},
    )


# --- Maven fetches ---------------------------------------------------------------------------


def maven_pom(dependencies: Iterable[tuple[str, str, str]]) -> str:
    """A packaging-pom project whose only purpose is to resolve these (group, artifact, version)."""
    deps = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in dependencies
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>rillet.devstack</groupId>
  <artifactId>fetch</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}
  </dependencies>
</project>
"""


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


def fetch_kafka(scratch: Path, target: Path) -> None:
    """The Kafka broker, its tools and a log4j2 binding (not in Kafka's POM)."""
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
        ],
    )


def maven_copy_pom(artifacts: Iterable[tuple[str, str, str]], output: Path | str) -> str:
    """A pom whose `dependency:copy` copies exactly these jars, resolving none of their POMs'
    dependencies (Spark's parent POM names repositories this machine cannot reach)."""
    items = "\n".join(
        f"          <artifactItem><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></artifactItem>"
        for g, a, v in artifacts
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>rillet.devstack</groupId>
  <artifactId>copy</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <build>
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
</project>
"""


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


def fetch_spark_kafka(scratch: Path, target: Path) -> None:
    """The Spark-Kafka connector jars, copied without resolving their POMs' dependencies."""
    artifacts = SPARK_KAFKA_ARTIFACTS
    (scratch / "pom.xml").write_text(maven_copy_pom(artifacts, target / "libs"))
    run_logged(["mvn", "-B", "-q", "dependency:copy"], cwd=scratch, log=target / "fetch.log")


KUBERNETES = Artefact("kubernetes", versions.KUBERNETES, ("go",), build_kubernetes)
ETCD = Artefact("etcd", versions.ETCD, ("go",), build_etcd)
HELM = Artefact("helm", versions.HELM, ("go",), build_helm)
KAFKA = Artefact("kafka", versions.KAFKA, ("mvn", "java"), fetch_kafka)
SPARK_KAFKA = Artefact("spark-kafka", versions.SPARK, ("mvn", "java"), fetch_spark_kafka)

ALL = (KUBERNETES, ETCD, KAFKA, SPARK_KAFKA, HELM)
