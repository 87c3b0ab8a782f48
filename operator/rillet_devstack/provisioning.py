"""Building and fetching the stack's artefacts into the version-keyed cache.

Kubernetes (control plane and node components), etcd, helm, CoreDNS and the local-path
provisioner are compiled from Go modules; Kafka and the Spark-Kafka connector are resolved from
Maven Central. Each artefact is built in a scratch directory and renamed into place only when
complete, so an interrupted build never leaves a half-filled cache entry.

A build reports what it is doing through a `Progress` callback (one short line at a time): Go
builds run with `-v` and report how many modules they downloaded and packages they compiled so
far, because a cold Kubernetes build takes many minutes and would otherwise look hung.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rillet.runtime.jvm import JAR, SOURCES
from rillet_devstack import paths, reporting, versions
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


_DOWNLOADING = re.compile(r"go: downloading (\S+) (\S+)")
# What `go build -v` prints for a package it compiles: the bare import path, nothing else.
_IMPORT_PATH = re.compile(r"[\w.~+-]+(?:/[\w.~+-]+)*")


@dataclass
class GoProgress:
    """How far a sequence of go commands has got, counted from their output.

    The module commands print `go: downloading <module> <version>` for each module they fetch;
    `go build -v` / `go install -v` print each package's import path as they compile it (never
    the ones found in the build cache, so a warm rebuild counts few). Other lines are ignored.
    """

    downloaded: int = 0
    compiled: int = 0
    latest: str = ""

    def feed(self, line: str) -> bool:
        """Account for one line of output; True if it changed the summary."""
        if match := _DOWNLOADING.fullmatch(line):
            self.downloaded += 1
            self.latest = f"{match[1]} {match[2]}"
        elif _IMPORT_PATH.fullmatch(line):
            self.compiled += 1
            self.latest = line
        else:
            return False
        return True

    def summary(self) -> str:
        """One line such as `12 modules downloaded, 340 packages compiled (k8s.io/api/core/v1)`."""
        counts = []
        if self.downloaded:
            counts.append(f"{self.downloaded} modules downloaded")
        if self.compiled:
            counts.append(f"{self.compiled} packages compiled")
        return ", ".join(counts) + (f" ({self.latest})" if self.latest else "")


@dataclass
class _GoCommands:
    """Go commands run in one directory and logged to one file, their progress counted together."""

    cwd: Path
    log: Path
    progress: reporting.Progress
    env: dict[str, str] = field(default_factory=lambda: dict(GO_ENV))
    tracker: GoProgress = field(default_factory=GoProgress)

    def run(self, *args: str | Path) -> None:
        def on_line(line: str) -> None:
            if self.tracker.feed(line):
                self.progress(self.tracker.summary())

        run_logged(["go", *args], cwd=self.cwd, log=self.log, env=self.env, on_line=on_line)


def _go_wrapper_module(scratch: Path, log: Path) -> Path:
    module = scratch / "module"
    module.mkdir()
    run_logged(
        ["go", "mod", "init", "rillet.local/devstack-build"], cwd=module, log=log, env=GO_ENV
    )
    return module


def _build_kubernetes_commands(
    scratch: Path, target: Path, progress: reporting.Progress, commands: Sequence[str]
) -> None:
    """Build `k8s.io/kubernetes/cmd/<command>` for each command, at the pinned release.

    k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with local paths,
    which a dependent module cannot use: a wrapper module replaces each with its published v0.N.P.
    The binaries are stamped with the release (`kubernetes_version_ldflags`) and built without
    cgo, as static binaries (kubelet included: nothing it needs here takes cgo).
    """
    version = versions.KUBERNETES
    log = target / "build.log"
    module = _go_wrapper_module(scratch, log)
    # Only k8s.io/kubernetes' go.mod is needed, but the command fetches the whole module first.
    progress(f"downloading k8s.io/kubernetes v{version}")
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
    packages = [f"k8s.io/kubernetes/cmd/{command}" for command in commands]
    go = _GoCommands(module, log, progress)
    go.run("get", *[f"{package}@v{version}" for package in packages])
    # One build for all commands: packages they share are compiled once, and both cores stay
    # busy across command boundaries. `-o <dir>/` names each binary after its command.
    ldflags = f"-s -w {kubernetes_version_ldflags(version)}"
    go.run("build", "-v", "-trimpath", "-ldflags", ldflags, "-o", f"{target}/", *packages)


def build_kubernetes(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """The control plane: kube-apiserver and kube-controller-manager."""
    _build_kubernetes_commands(
        scratch, target, progress, ("kube-apiserver", "kube-controller-manager")
    )


def build_kubernetes_node(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """A worker node's components and the matching client: kubelet, kube-scheduler, kube-proxy
    and kubectl (k8s.io/kubernetes/cmd/kubectl, a thin main over k8s.io/kubectl)."""
    _build_kubernetes_commands(
        scratch, target, progress, ("kubelet", "kube-scheduler", "kube-proxy", "kubectl")
    )


def build_etcd(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """etcd's server from go.etcd.io/etcd/server/v3 (its main package), through a wrapper module.

    The etcd module replaces its sibling modules with local paths; a wrapper module that requires
    the server module gets each sibling at its published version of the same release instead.
    """
    log = target / "build.log"
    go = _GoCommands(_go_wrapper_module(scratch, log), log, progress)
    package = "go.etcd.io/etcd/server/v3"
    go.run("get", f"{package}@v{versions.ETCD}")
    go.run("build", "-v", "-trimpath", "-ldflags", "-s -w", "-o", target / "etcd", package)


def _go_install(target: Path, progress: reporting.Progress, package: str, ldflags: str) -> None:
    """`go install package@version` into `target`.

    Only for modules without replace directives: go install refuses a module that has any (so a
    pin that adds some fails loudly, and needs etcd's wrapper-module recipe instead).
    """
    # -mod=mod is refused outside a main module, and there is none here.
    env = {**GO_ENV, "GOBIN": str(target), "GOFLAGS": ""}
    go = _GoCommands(target, target / "build.log", progress, env)
    go.run("install", "-v", "-trimpath", "-ldflags", ldflags, package)


def helm_ldflags(helm_version: str, kubernetes_version: str) -> str:
    """Helm's own version, and the Kubernetes version offline `helm template`/`lint` assume."""
    major, minor, _ = kubernetes_version.split(".")
    flags = [f"-X helm.sh/helm/v3/internal/version.version=v{helm_version}"]
    for package in ("helm.sh/helm/v3/pkg/lint/rules", "helm.sh/helm/v3/pkg/chartutil"):
        flags += [f"-X {package}.k8sVersionMajor={major}", f"-X {package}.k8sVersionMinor={minor}"]
    return " ".join(flags)


def build_helm(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """The helm CLI, `go install`ed at the pinned release (helm has no replace directives)."""
    ldflags = f"-s -w {helm_ldflags(versions.HELM, versions.KUBERNETES)}"
    _go_install(target, progress, f"helm.sh/helm/v3/cmd/helm@v{versions.HELM}", ldflags)


def build_coredns(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """CoreDNS (the main package at the root of github.com/coredns/coredns), default plugins.

    Its go.mod has no replace directives, so it is `go install`ed as released. Its version is a
    constant in the source (`coredns -version` reports it); only the commit is left unstamped.
    """
    package = f"github.com/coredns/coredns@v{versions.COREDNS}"
    _go_install(target, progress, package, "-s -w")


def build_local_path_provisioner(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """Rancher's local-path provisioner (the main package at its module root).

    Its go.mod has no replace directives (checked for the pinned release; it vendors its
    dependencies, which module mode ignores), so it is `go install`ed as released, with the
    version its own build script stamps into `main.VERSION`.
    """
    version = versions.LOCAL_PATH_PROVISIONER
    package = f"github.com/rancher/local-path-provisioner@v{version}"
    _go_install(target, progress, package, f"-s -w -X main.VERSION=v{version}")


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


def fetch_kafka_streams(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """Kafka Streams at the broker's version and its runtime dependencies (RocksDB), for the
    benchmark's peer row (bench/pipeline.py): no stack needs it."""
    _copy_maven_dependencies(
        scratch, target, [("org.apache.kafka", "kafka-streams", versions.KAFKA)]
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


def fetch_spark_kafka(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """The Spark-Kafka connector jars, copied without resolving their POMs' dependencies."""
    artifacts = SPARK_KAFKA_ARTIFACTS
    (scratch / "pom.xml").write_text(maven_copy_pom(artifacts, target / "libs"))
    run_logged(["mvn", "-B", "-q", "dependency:copy"], cwd=scratch, log=target / "fetch.log")


SPARK_CLASSES_FILE = "driver.jsa"


def pyspark_jars() -> Path | None:
    """The jars directory of the pyspark this Python imports, if it has one."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "jars"


def driver_classpath_version(jars: Path | None = None, java: str | None = None) -> str:
    """The cache key of the drivers' class archive: the class path it was made for.

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
    for entry in [Path(java).resolve(), jars, *sorted(jars.glob("*"))]:
        status = entry.stat() if entry.exists() else None
        stamp = (status.st_size, status.st_mtime_ns) if status else None
        digest.update(f"{entry}:{stamp}\n".encode())
    return digest.hexdigest()[:16]


def build_spark_classes(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """A class-data sharing archive of a local Spark driver's classes (runtime.classsharing),
    with the connector jars `rillet run` gives it."""
    from rillet.runtime import classsharing

    jars = sorted(str(jar) for jar in (SPARK_KAFKA.directory / "libs").glob("*.jar"))
    classsharing.build(target / SPARK_CLASSES_FILE, jars)


def jar_version(sources: Sequence[Path] = SOURCES) -> str:
    """The cache key of Rillet's jar: its sources and what they are compiled against."""
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    digest.update(repr((versions.SPARK, SPARK_KAFKA_ARTIFACTS)).encode())
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


KUBERNETES = Artefact("kubernetes", versions.KUBERNETES, ("go",), build_kubernetes)
KUBERNETES_NODE = Artefact("kubernetes-node", versions.KUBERNETES, ("go",), build_kubernetes_node)
ETCD = Artefact("etcd", versions.ETCD, ("go",), build_etcd)
HELM = Artefact("helm", versions.HELM, ("go",), build_helm)
COREDNS = Artefact("coredns", versions.COREDNS, ("go",), build_coredns)
LOCAL_PATH = Artefact(
    "local-path-provisioner",
    versions.LOCAL_PATH_PROVISIONER,
    ("go",),
    build_local_path_provisioner,
)
KAFKA = Artefact("kafka", f"{versions.KAFKA}-slf4j{versions.SLF4J}", ("mvn", "java"), fetch_kafka)
SPARK_KAFKA = Artefact("spark-kafka", versions.SPARK, ("mvn", "java"), fetch_spark_kafka)
# Built by the machine's JDK from the connector: after SPARK_KAFKA.
SPARK_CLASSES = Artefact(
    "spark-classes",
    f"{versions.SPARK}-{driver_classpath_version()}",
    ("java",),
    build_spark_classes,
    keep=3,
)
# Compiled by the machine's JDK against pyspark and the connector: after SPARK_KAFKA.
RILLET_SPARK = Artefact("rillet-spark", jar_version(), ("javac",), build_jar)
# The benchmark's alone (bench/pipeline.py provisions it when it runs).
KAFKA_STREAMS = Artefact("kafka-streams", versions.KAFKA, ("mvn", "java"), fetch_kafka_streams)

# Cheap first: a missing tool or an unreachable registry shows before the long Kubernetes builds.
ALL = (
    KAFKA,
    SPARK_KAFKA,
    RILLET_SPARK,
    SPARK_CLASSES,
    ETCD,
    HELM,
    LOCAL_PATH,
    COREDNS,
    KUBERNETES,
    KUBERNETES_NODE,
)
# Made for a checkout (its sources, its virtualenv), not for the stack: a stack another checkout
# started is reused with these made for this one.
CHECKOUT_ARTEFACTS = (RILLET_SPARK, SPARK_CLASSES)
# Only a stack with a worker node runs these.
NODE_ARTEFACTS = (KUBERNETES_NODE, COREDNS, LOCAL_PATH)


def artefacts(*, with_node: bool) -> tuple[Artefact, ...]:
    """What a stack needs, in build order: everything, or all but the worker node's parts."""
    return tuple(a for a in ALL if with_node or a not in NODE_ARTEFACTS)
