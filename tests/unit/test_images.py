"""The project's images: Dockerfiles that agree with the pins, and the pure parts of building them.

Test plan:
- both Dockerfiles start `FROM ${BASE_IMAGE}` with the default the local stack builds
  (versions.BASE_IMAGE), install Debian's Python 3.11 (and OpenJDK 17 for the runtime), run as
  uid 10001 under tini, and install Rillet into the venv (with pyspark only in the runtime, at
  pyproject's pin); the runtime's RILLET_SPARK_JARS lists exactly the connector jars and the
  exactly-once writer's; the S3A jars join pyspark's own, before the class archives are made.
- the content tag changes when any input (a source file, the Dockerfile, the base image id)
  changes and only then; generated files are no input.
- buildah's STEP lines and debootstrap's stages become progress labels, one reporter span at a
  time; a failure ends the open span with the error.
- the host's apt sources (deb822 and one-line) give the mirror and the image's sources.
- the build mounts its trust, never pulls, and names the base explicitly.
- `ctr images ls` is read back for the id label, and for the older builds to remove.
- the executor entrypoint assembles KubernetesExecutorBackend's command line from Spark's env.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet.runtime import jvm
from rillet_devstack import debootstrapping, images, importing, mavenfetching, reporting, versions

REPO = Path(__file__).resolve().parents[2]
OPERATOR = (REPO / "images/operator/Dockerfile").read_text()
RUNTIME = (REPO / "images/runtime/Dockerfile").read_text()
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
# The Python minor version of each Debian release's python3 package.
DEBIAN_PYTHON = {"bookworm": "3.11"}


def instructions(dockerfile: str) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(
        line for line in dockerfile.splitlines() if not line.lstrip().startswith("#")
    ))  # fmt: skip
    return [" ".join(line.split()) for line in joined.splitlines() if line.strip()]


def env_value(dockerfile: str, name: str) -> str:
    for instruction in instructions(dockerfile):
        if instruction.startswith("ENV "):
            found = re.search(rf"(?:^| ){name}=(\S+)", instruction[4:])
            if found:
                return found.group(1)
    raise AssertionError(f"no ENV {name}")


@pytest.mark.parametrize("dockerfile", [OPERATOR, RUNTIME], ids=["operator", "runtime"])
def test_dockerfiles_build_on_the_base_the_stack_makes(dockerfile: str) -> None:
    steps = instructions(dockerfile)
    assert steps[0].startswith("ARG BASE_IMAGE=")
    default = steps[0].removeprefix("ARG BASE_IMAGE=")
    # The short name resolves to the pinned, fully qualified name the stack commits.
    assert "/" not in default
    assert versions.BASE_IMAGE.rsplit("/", 1)[1] == default
    # Every stage starts from the base or from an earlier stage: nothing is pulled.
    stages: set[str] = set()
    for step in (s.split() for s in steps if s.startswith("FROM ")):
        assert step[1] == "${BASE_IMAGE}" or step[1] in stages, step
        stages.update(step[3:4] if step[2:3] == ["AS"] else [])


@pytest.mark.parametrize("dockerfile", [OPERATOR, RUNTIME], ids=["operator", "runtime"])
def test_dockerfiles_run_rillet_from_its_venv_as_uid_10001_under_tini(dockerfile: str) -> None:
    steps = instructions(dockerfile)
    assert [s for s in steps if s.startswith("ENTRYPOINT ")] == [
        'ENTRYPOINT ["/usr/bin/tini", "--", "rillet"]'
    ]
    assert [s for s in steps if s.startswith("USER ")] == ["USER 10001"]
    assert "useradd --uid 10001 --gid 10001" in dockerfile
    assert "python3 -m venv /opt/rillet/venv" in dockerfile
    assert env_value(dockerfile, "PATH").startswith("/opt/rillet/venv/bin:")
    for package in ("python3", "python3-venv", "tini"):
        assert re.search(rf"--no-install-recommends[^&]* {package}( |$)", dockerfile), package
    assert dockerfile.count("rm -rf /var/lib/apt/lists/*") == dockerfile.count("apt-get update")
    assert all("pip install --no-cache-dir" in s for s in steps if "pip install" in s)


def test_python_is_debians_311_and_pyproject_allows_it() -> None:
    python = DEBIAN_PYTHON[versions.DEBIAN_RELEASE]
    assert PYPROJECT["project"]["requires-python"] == f">={python}"
    assert env_value(RUNTIME, "SPARK_HOME") == (
        f"/opt/rillet/venv/lib/python{python}/site-packages/pyspark"
    )


def test_runtime_has_openjdk_17_and_pyspark_at_pyprojects_pin() -> None:
    (pin,) = [r for r in PYPROJECT["project"]["optional-dependencies"]["spark"] if "pyspark" in r]
    assert pin == f"pyspark[sql]=={versions.SPARK}"
    lock = (REPO / "images" / "runtime" / "requirements.txt").read_text(encoding="utf-8")
    assert f"\npyspark=={versions.SPARK} \\\n" in lock
    assert "openjdk-17-jre-headless" in RUNTIME
    assert env_value(RUNTIME, "JAVA_HOME") == "/usr/lib/jvm/java-17"
    # The `spark` extra's requirements, as the image's lock pins them, hashes checked.
    assert "--require-hashes -r /opt/rillet/deps/requirements.txt" in RUNTIME


def test_operator_image_carries_no_pyspark() -> None:
    assert "spark" not in " ".join(instructions(OPERATOR)).lower()
    # Its lock holds the one extra it is for, protoc (Table servers compile Protobuf schemas),
    # and nothing of Spark's.
    lock = (REPO / "images" / "operator" / "requirements.txt").read_text(encoding="utf-8")
    assert "--extra protoc" in (REPO / "Makefile").read_text(encoding="utf-8")
    assert "\ngrpcio-tools==" in lock
    assert "pyspark" not in lock
    assert PYPROJECT["project"]["optional-dependencies"]["protoc"] == ["grpcio-tools>=1.85,<2"]


def test_runtime_jars_are_the_connector_artifacts_and_rillets_own() -> None:
    expected = [f"/opt/rillet/jars/{a}-{v}.jar" for _, a, v in mavenfetching.CONNECTOR_ARTIFACTS]
    expected.append(f"/opt/rillet/jars/{jvm.JAR}")
    assert env_value(RUNTIME, "RILLET_SPARK_JARS").split(",") == expected
    # Every Java source of runtime.jvm (one directory) is compiled into that jar.
    directory = jvm.SOURCES[0].parent.relative_to(REPO).as_posix()
    assert f"COPY {directory}/*.java /build/src/" in RUNTIME
    assert "/build/src/*.java" in " ".join(instructions(RUNTIME))
    assert f"COPY --from=jvm /build/{jvm.JAR} /opt/rillet/jars/" in RUNTIME
    assert "COPY images/runtime/connector-pom.xml /build/pom.xml" in RUNTIME
    assert "COPY --from=jars /jars /opt/rillet/jars" in RUNTIME


def test_runtime_puts_the_s3a_jars_among_pysparks() -> None:
    # On every driver's and executor's class path (not spark.jars), from s3a-pom.xml.
    assert "COPY images/runtime/s3a-pom.xml /build/s3a/pom.xml" in RUNTIME
    assert "-f /build/s3a/pom.xml dependency:copy -DoutputDirectory=/s3a-jars" in RUNTIME
    assert "COPY --from=jars /s3a-jars/ ${SPARK_HOME}/jars/" in RUNTIME
    final_stage = RUNTIME.rsplit("\nFROM ", 1)[1]
    # Before the class archives, which fit one class path.
    assert final_stage.index("/s3a-jars/") < final_stage.index("spark-executor archive")
    assert not any("s3a" in jar for jar in env_value(RUNTIME, "RILLET_SPARK_JARS").split(","))


def test_content_tag_follows_every_input_and_nothing_else() -> None:
    inputs = images.image_inputs(REPO, "runtime")
    tag = images.content_tag(inputs, base_image_id="base1")
    assert images.content_tag(dict(inputs), base_image_id="base1") == tag
    assert re.fullmatch(r"[0-9a-f]{16}", tag)
    source = "operator/rillet/cli/__init__.py"
    changed = {**inputs, source: inputs[source] + b"\n# changed\n"}
    assert images.content_tag(changed, base_image_id="base1") != tag
    changed = {**inputs, "images/runtime/Dockerfile": b"FROM scratch\n"}
    assert images.content_tag(changed, base_image_id="base1") != tag
    assert images.content_tag({**inputs, "operator/new.py": b""}, base_image_id="base1") != tag
    assert images.content_tag(inputs, base_image_id="base2") != tag


def test_image_inputs_are_its_build_context() -> None:
    operator = images.image_inputs(REPO, "operator")
    runtime = images.image_inputs(REPO, "runtime")
    for inputs in (operator, runtime):
        assert {"pyproject.toml", "README.md"} <= set(inputs)
        assert "operator/rillet/cli/__init__.py" in inputs
        assert not [p for p in inputs if "__pycache__" in p or ".egg-info" in p]
    assert {"images/operator/Dockerfile", "images/operator/requirements.txt"} <= set(operator)
    assert "images/runtime/requirements.txt" in runtime
    assert not [p for p in operator if p.startswith("images/runtime/")]
    assert "images/runtime/executor-entrypoint.sh" in runtime


def test_references_are_local_names() -> None:
    assert images.project_reference("runtime", "abc") == "localhost/rillet/runtime:abc"


def test_buildah_steps_become_labels() -> None:
    assert images.buildah_step("STEP 2/11: RUN apt-get   update") == "step 2/11: RUN apt-get update"
    assert images.buildah_step("[1/2] STEP 1/4: FROM x AS jars") == "[1/2] step 1/4: FROM x AS jars"
    long = images.buildah_step("STEP 3/9: RUN " + "x" * 200)
    assert long is not None
    assert len(long) == images.STEP_LABEL_WIDTH
    assert long.endswith("...")
    assert images.buildah_step("Getting image source signatures") is None


def test_each_new_stage_closes_the_previous_span_and_a_failure_ends_the_open_one() -> None:
    events: list[str] = []

    @contextlib.contextmanager
    def report(name: str) -> Iterator[None]:
        events.append(f"start {name}")
        try:
            yield
        except RuntimeError:
            events.append(f"failed {name}")
            raise
        events.append(f"done {name}")

    def build() -> None:
        with reporting.Spans(report, "x: ") as spans:
            on_line = reporting.stage_changes(spans, debootstrapping.debootstrap_stage)
            for line in ("I: Retrieving a", "I: Validating a", "I: Checking", "I: Extracting a"):
                on_line(line)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        build()
    assert events == [
        "start x: debootstrap: download packages",
        "done x: debootstrap: download packages",
        "start x: debootstrap: extract packages",
        "failed x: debootstrap: extract packages",
    ]


def test_debootstrap_stages_become_labels() -> None:
    assert (
        debootstrapping.debootstrap_stage("I: Retrieving libc6 2.36")
        == "debootstrap: download packages"
    )
    assert debootstrapping.debootstrap_stage("I: Unpacking libc6:amd64...") == (
        "debootstrap: install packages"
    )
    assert (
        debootstrapping.debootstrap_stage("I: Configuring apt...")
        == "debootstrap: configure packages"
    )
    assert (
        debootstrapping.debootstrap_stage("I: Resolving dependencies of base packages...") is None
    )
    assert debootstrapping.debootstrap_stage("W: Retrieving") is None


DEB822 = """\
Types: deb
# a comment
URIs: http://mirror.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://mirror.invalid/debian
Suites: bookworm
Components: main

Types: deb
URIs: http://security.invalid/debian-security
Suites: bookworm-security
Components: main

Enabled: no
Types: deb
URIs: http://off.invalid/debian
Suites: bookworm
Components: main
"""


def test_host_sources_give_mirror_and_image_sources() -> None:
    sources = debootstrapping.parse_deb822_sources(DEB822) + debootstrapping.parse_one_line_sources(
        "deb [arch=amd64] http://other.invalid/x nodistro main\n# deb http://c.invalid bookworm\n"
    )
    assert [s.uri for s in sources] == [
        "http://mirror.invalid/debian",
        "http://security.invalid/debian-security",
        "http://other.invalid/x",
    ]
    mine = debootstrapping.release_sources(sources, "bookworm")
    assert [s.suites for s in mine] == [("bookworm", "bookworm-updates"), ("bookworm-security",)]
    assert debootstrapping.bootstrap_mirror(mine, "bookworm") == "http://mirror.invalid/debian"
    with pytest.raises(debootstrapping.NoMirrorError):
        debootstrapping.bootstrap_mirror(mine, "trixie")
    rendered = debootstrapping.render_deb822_sources(mine)
    assert debootstrapping.parse_deb822_sources(rendered) == mine


def test_slimming_follows_the_dpkg_excludes() -> None:
    excluded, included = debootstrapping.slim_removals()
    assert "usr/share/doc/*" in excluded
    assert "usr/share/doc/*/copyright" in included


def test_build_mounts_the_trust_and_never_pulls() -> None:
    arguments = images.bud_arguments(
        dockerfile=Path("/c/images/runtime/Dockerfile"),
        context=Path("/c"),
        reference="localhost/rillet/runtime:t",
        volumes=["--volume=/x/pip.conf:/etc/pip.conf:ro"],
    )
    assert arguments[:2] == ["buildah", "bud"]
    assert "--pull=never" in arguments
    assert f"--build-arg=BASE_IMAGE={versions.BASE_IMAGE}" in arguments
    assert "--volume=/x/pip.conf:/etc/pip.conf:ro" in arguments
    assert arguments[-1] == "/c"
    assert images.pip_config("/t/ca.crt") == "[global]\ncert = /t/ca.crt\n"
    assert "-Djavax.net.ssl.trustStore=/t/cacerts" in images.maven_rc("/t/cacerts")


def test_containerd_listing_gives_the_imported_id() -> None:
    listing = (
        "REF TYPE DIGEST SIZE PLATFORMS LABELS\n"
        "localhost/rillet/pause:3.10 application/vnd.docker.distribution.manifest.v2+json "
        "sha256:ab 300.0 KiB linux/amd64 io.rillet.image-id=f00,other=1\n"
        "localhost/rillet/runtime:t application/vnd.oci.image.manifest.v1+json "
        "sha256:cd 1.0 GiB linux/amd64 -\n"
    )
    assert importing.containerd_labels(listing, "localhost/rillet/pause:3.10") == {
        importing.IMPORTED_ID_LABEL: "f00",
        "other": "1",
    }
    assert importing.containerd_labels(listing, "localhost/rillet/runtime:t") == {}
    assert importing.containerd_labels(listing, "localhost/rillet/operator:t") is None


def test_stale_images_are_every_other_build_under_its_name_and_its_cri_id() -> None:
    manifest = "application/vnd.oci.image.manifest.v1+json"
    listing = (
        "REF TYPE DIGEST SIZE PLATFORMS LABELS\n"
        f"localhost/rillet/pause:3.10 {manifest} sha256:p 300.0 KiB linux/amd64 -\n"
        f"localhost/rillet/runtime:new {manifest} sha256:n 1.0 GiB linux/amd64 -\n"
        f"localhost/rillet/runtime:old {manifest} sha256:o 1.0 GiB linux/amd64 -\n"
        f"sha256:1d0fnew {manifest} sha256:n 1.0 GiB linux/amd64 io.cri-containerd.image=managed\n"
        f"sha256:1d0f0ld {manifest} sha256:o 1.0 GiB linux/amd64 io.cri-containerd.image=managed\n"
    )
    keep = ["localhost/rillet/pause:3.10", "localhost/rillet/runtime:new"]
    assert importing.stale_image_refs(listing, keep) == [
        "localhost/rillet/runtime:old",
        "sha256:1d0f0ld",
    ]
    assert importing.stale_image_refs(listing.splitlines()[0], keep) == []


def test_executor_entrypoint_assembles_the_backend_command(tmp_path: Path) -> None:
    script = REPO / "images/runtime/executor-entrypoint.sh"
    bin_dir, java_home, spark_home = tmp_path / "bin", tmp_path / "jdk", tmp_path / "pyspark"
    (java_home / "bin").mkdir(parents=True)
    (spark_home / "jars").mkdir(parents=True)
    bin_dir.mkdir()
    for jar in ("spark-core.jar", "avro.jar", "kryo.jar"):
        (spark_home / "jars" / jar).touch()
    archive = tmp_path / "executor.jsa"
    archive.touch()
    # tini execs what follows `--`; java prints its arguments one per line.
    (bin_dir / "tini").write_text('#!/bin/bash\nwhile [ "$1" != -- ]; do shift; done\nshift\n'
                                  'exec "$@"\n')  # fmt: skip
    (java_home / "bin/java").write_text('#!/bin/bash\nprintf "%s\\n" "$@"\n')
    for tool in (bin_dir / "tini", java_home / "bin/java"):
        tool.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "JAVA_HOME": str(java_home),
        "SPARK_HOME": str(spark_home),
        "RILLET_SPARK_EXECUTOR_CLASS_ARCHIVE": str(archive),
        "RILLET_SPARK_JARS": "/j/a.jar,/j/b.jar",
        "SPARK_JAVA_OPT_10": "-Dten",
        "SPARK_JAVA_OPT_2": "-Dtwo",
        "SPARK_JAVA_OPT_0": "--add-opens=java.base/java.lang=ALL-UNNAMED",
        "SPARK_EXECUTOR_MEMORY": "512m",
        "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.0.0.1:7078",
        "SPARK_EXECUTOR_ID": "3",
        "SPARK_EXECUTOR_CORES": "1",
        "SPARK_APPLICATION_ID": "spark-app",
        "SPARK_EXECUTOR_POD_IP": "10.244.0.9",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_POD_NAME": "app-exec-3",
    }
    run = subprocess.run(
        ["bash", str(script), "executor"], env=env, capture_output=True, text=True, check=True
    )
    assert run.stdout.splitlines() == [
        "--add-opens=java.base/java.lang=ALL-UNNAMED",
        "-Dtwo",
        "-Dten",
        f"-XX:SharedArchiveFile={archive}",
        "-Xms512m",
        "-Xmx512m",
        "-cp",
        # Sorted, the configuration last: the classpath the class archive was written with.
        f"{spark_home}/jars/avro.jar:{spark_home}/jars/kryo.jar:{spark_home}/jars/spark-core.jar"
        ":/j/a.jar:/j/b.jar:/opt/spark/conf",
        "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
        *("--driver-url", "spark://CoarseGrainedScheduler@10.0.0.1:7078"),
        *("--executor-id", "3", "--cores", "1", "--app-id", "spark-app"),
        *("--hostname", "10.244.0.9", "--resourceProfileId", "0", "--podName", "app-exec-3"),
    ]
    archive.unlink()  # an archive that is not there is not named
    without = subprocess.run(
        ["bash", str(script), "executor"], env=env, capture_output=True, text=True, check=True
    )
    assert not [line for line in without.stdout.splitlines() if "SharedArchiveFile" in line]
    refused = subprocess.run(["bash", str(script), "driver"], env=env, capture_output=True)
    assert refused.returncode == 22
    assert os.access(script, os.X_OK)
