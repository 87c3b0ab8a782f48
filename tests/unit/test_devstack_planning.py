"""Pure pieces of the local stack: configs, flags and provisioning plans.

Test plan:
- a missing tool is named in one line with how to get it; present tools resolve to paths.
- only artefacts not yet cached are built, and only their tools are required.
- the exactly-once writer's jar is cached by its source: an edited source is compiled again.
- the drivers' class archive is cached by the class path it fits: another virtualenv, a jar
  reinstalled (its size or time), or another JDK needs an archive of its own; of such
  per-checkout versions only the few used last are kept.
- the staging-module list is derived from k8s.io/kubernetes' go.mod.
- version ldflags stamp both version packages with the pinned release.
- go output is counted into downloaded modules and compiled packages; other lines are ignored.
- a command's output reaches the progress callback line by line, and the log keeps all of it.
- every Go-built artefact is in the plan, cheap ones before the Kubernetes builds; a stack
  without a worker node builds none of the node's.
- a three-node KRaft config lists every voter and replicates internal topics three times; a
  secured node listens on SASL_SSL with SCRAM, and its authorizer denies what no ACL allows.
- the kubeconfig carries the server, CA and token.
- `rillet dev up` reuses a running stack only with the same Kafka and node and at least the
  object store and registry asked for (a `make demo` stack does not serve the tests).
"""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path

import pytest
import yaml

from rillet_devstack import gobuilding, provisioning, reporting, toolchain
from rillet_devstack import stack as devstack
from rillet_devstack.commands import CommandFailedError, run_logged
from rillet_devstack.controlplane import build_kubeconfig
from rillet_devstack.kafka import KafkaSecurity, NodePorts, build_server_properties


def test_missing_tools_reported_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(toolchain.MissingToolError) as raised:
        toolchain.require(["mvn", "go"])
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("missing on PATH: go, mvn")
    assert "install Go" in message
    assert "install Maven" in message


def test_present_tool_resolves_to_its_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = tmp_path / "go"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert toolchain.require(["go"]) == {"go": str(tool)}


def test_only_missing_artefacts_need_their_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RILLET_CACHE_DIR", str(tmp_path))
    cached = provisioning.KAFKA.directory
    cached.mkdir(parents=True)
    (cached / provisioning.COMPLETE_MARKER).touch()

    needed = provisioning.missing([provisioning.KAFKA, provisioning.HELM])

    assert needed == [provisioning.HELM]
    assert provisioning.tools_for(needed) == {"go"}


def test_rillets_jar_is_compiled_again_when_a_source_changes(tmp_path: Path) -> None:
    writer, plugin = tmp_path / "Writer.java", tmp_path / "Plugin.java"
    writer.write_text("class A {}")
    plugin.write_text("class B {}")
    first = provisioning.jar_version([plugin, writer])
    assert provisioning.jar_version([plugin, writer]) == first
    plugin.write_text("class B { }")
    assert provisioning.jar_version([plugin, writer]) != first
    assert provisioning.RILLET_SPARK.version == provisioning.jar_version()


def test_the_class_archive_is_made_again_for_another_class_path(tmp_path: Path) -> None:
    jars, java = tmp_path / "venv" / "jars", tmp_path / "java"
    jars.mkdir(parents=True)
    java.write_text("jvm")
    (jars / "spark-core.jar").write_text("classes")
    first = provisioning.driver_classpath_version(jars, str(java))
    assert provisioning.driver_classpath_version(jars, str(java)) == first

    copy = tmp_path / "other-venv" / "jars"
    shutil.copytree(jars, copy)  # the same jars, as another checkout's virtualenv has them
    assert provisioning.driver_classpath_version(copy, str(java)) != first

    os.utime(jars / "spark-core.jar", ns=(0, 0))  # reinstalled: same path, another time
    assert provisioning.driver_classpath_version(jars, str(java)) != first

    other_java = tmp_path / "java-21"
    other_java.write_text("jvm")
    assert provisioning.driver_classpath_version(jars, str(other_java)) != first


def test_the_class_archive_is_made_again_for_another_warm_up(tmp_path: Path) -> None:
    jars, java, warm_up = tmp_path / "jars", tmp_path / "java", tmp_path / "classsharing.py"
    jars.mkdir()
    java.write_text("jvm")
    warm_up.write_text("spark.range(1).collect()")
    first = provisioning.driver_classpath_version(jars, str(java), warm_up)
    assert provisioning.driver_classpath_version(jars, str(java), warm_up) == first
    warm_up.write_text("spark.range(1).selectExpr('to_avro(id)').collect()")  # more classes
    assert provisioning.driver_classpath_version(jars, str(java), warm_up) != first


def test_only_the_versions_used_last_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RILLET_CACHE_DIR", str(tmp_path))

    def build(scratch: Path, target: Path, progress: reporting.Progress) -> None:
        (target / "driver.jsa").write_text("classes")

    def made(version: str) -> provisioning.Artefact:
        return provisioning.Artefact("archive", version, (), build, keep=2)

    for age, version in enumerate(("a", "b", "c")):
        provisioning.provision(made(version))
        os.utime(made(version).directory / provisioning.COMPLETE_MARKER, (age, age))
    provisioning.provision(made("a"))  # used again: now the latest used of the others
    provisioning.provision(made("d"))

    kept = sorted(entry.name for entry in tmp_path.glob("archive-v*"))
    assert kept == ["archive-va", "archive-vd"]
    assert (made("d").directory / "driver.jsa").read_text() == "classes"


def test_staging_modules_come_from_go_mod() -> None:
    go_mod = (
        "module k8s.io/kubernetes\n\nrequire (\n\tk8s.io/api v0.0.0\n"
        "\tk8s.io/utils v0.0.0-20250604170112-4c0f3b243397\n\tk8s.io/client-go v0.0.0\n)\n"
    )
    assert gobuilding.staging_modules(go_mod) == ["k8s.io/api", "k8s.io/client-go"]


def test_version_ldflags_stamp_both_version_packages() -> None:
    flags = gobuilding.kubernetes_version_ldflags("1.34.4")
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {package}.gitVersion=v1.34.4" in flags
        assert f"-X {package}.gitMinor=34" in flags


def test_go_progress_counts_downloads_and_compiled_packages() -> None:
    tracker = gobuilding.GoProgress()
    output = [
        "go: downloading k8s.io/api v0.34.4",
        "go: added k8s.io/kubernetes v1.34.4",
        "internal/goarch",
        "# k8s.io/kubernetes/pkg/kubelet",
        "pkg/kubelet/kubelet.go:12:2: undefined: x",
        "k8s.io/kubernetes/cmd/kubelet",
    ]
    changed = [tracker.feed(line) for line in output]
    assert changed == [True, False, True, False, False, True]
    assert tracker.summary() == (
        "1 modules downloaded, 2 packages compiled (k8s.io/kubernetes/cmd/kubelet)"
    )


def test_go_progress_summary_before_any_compile() -> None:
    tracker = gobuilding.GoProgress()
    assert tracker.summary() == ""
    tracker.feed("go: downloading github.com/coredns/caddy v1.1.4")
    assert tracker.summary() == "1 modules downloaded (github.com/coredns/caddy v1.1.4)"


def test_run_logged_streams_lines_and_keeps_the_log(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    lines: list[str] = []
    run_logged(["sh", "-c", "echo one; echo two >&2"], log=log, on_line=lines.append)
    assert lines == ["one", "two"]
    assert log.read_text().endswith("one\ntwo\n")
    with pytest.raises(CommandFailedError, match="exited 3"):
        run_logged(["sh", "-c", "echo bad; exit 3"], log=log, on_line=lines.append)
    assert lines[-1] == "bad"


def test_plan_holds_every_go_artefact_cheap_first() -> None:
    names = [artefact.name for artefact in provisioning.ALL]
    for name in ("kubernetes", "kubernetes-node", "coredns", "local-path-provisioner", "etcd"):
        assert name in names
    assert names.index("coredns") < names.index("kubernetes") < names.index("kubernetes-node")
    assert provisioning.KUBERNETES_NODE.directory != provisioning.KUBERNETES.directory


def test_a_stack_without_node_builds_no_node_artefact() -> None:
    without = provisioning.artefacts(with_node=False)
    assert provisioning.KUBERNETES in without
    assert not set(without) & set(provisioning.NODE_ARTEFACTS)
    assert provisioning.artefacts(with_node=True) == provisioning.ALL


def test_helm_ldflags_set_kubernetes_version_for_offline_rendering() -> None:
    flags = gobuilding.helm_ldflags("3.21.4", "1.34.4")
    assert "helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=34" in flags
    assert "helm.sh/helm/v3/internal/version.version=v3.21.4" in flags


def test_three_node_quorum_config() -> None:
    quorum = {n: NodePorts(broker=9000 + n, controller=9100 + n) for n in (1, 2, 3)}
    text = build_server_properties(node_id=2, ports=quorum[2], quorum=quorum, log_dir=Path("/data"))
    settings = dict(line.split("=", 1) for line in text.splitlines())
    assert settings["node.id"] == "2"
    assert settings["controller.quorum.voters"] == (
        "1@127.0.0.1:9101,2@127.0.0.1:9102,3@127.0.0.1:9103"
    )
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:9002,CONTROLLER://127.0.0.1:9102"
    assert settings["offsets.topic.replication.factor"] == "3"


def test_single_node_replicates_internal_topics_once() -> None:
    ports = NodePorts(broker=1, controller=2)
    text = build_server_properties(node_id=1, ports=ports, quorum={1: ports}, log_dir=Path("/d"))
    assert "offsets.topic.replication.factor=1\n" in text


def test_a_secured_node_listens_on_sasl_ssl_and_denies_what_no_acl_allows() -> None:
    ports = NodePorts(broker=9001, controller=9101)
    security = KafkaSecurity(
        ca_cert=Path("/pki/ca.crt"),
        keystore=Path("/pki/kafka-keystore.pem"),
        admin_user="admin",
        admin_password="s3cret",
    )
    text = build_server_properties(
        node_id=1, ports=ports, quorum={1: ports}, log_dir=Path("/d"), security=security
    )
    settings = dict(line.split("=", 1) for line in text.splitlines())

    assert settings["listeners"] == "SASL_SSL://127.0.0.1:9001,CONTROLLER://127.0.0.1:9101"
    assert settings["inter.broker.listener.name"] == "SASL_SSL"
    assert settings["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
    assert settings["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert settings["allow.everyone.if.no.acl.found"] == "false"
    assert settings["authorizer.class.name"].endswith(".StandardAuthorizer")
    assert settings["ssl.truststore.location"] == "/pki/ca.crt"
    assert "s3cret" not in repr(security)


def test_kubeconfig_carries_server_ca_and_token() -> None:
    config = yaml.safe_load(
        build_kubeconfig(server="https://127.0.0.1:6443", ca_pem=b"PEM", token="t0k", user="me")
    )
    assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert (
        base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]) == b"PEM"
    )
    assert config["users"] == [{"name": "me", "user": {"token": "t0k"}}]


def _running(**parts: object) -> devstack.StackState:
    node = devstack.NodeState(
        root=Path("/state/node"),
        containerd_socket=Path("/x.sock"),
        sysctls={},
        preexisting_paths=[],
    )
    return devstack.StackState.model_validate(
        {
            "processes": [],
            "kubeconfig": "/state/kubeconfig",
            "apiserver": "https://10.99.0.1:6443",
            "kafka_bootstrap": "10.99.0.1:9092",
            "kafka_brokers": 1,
            "node": node,
            **parts,
        }
    )


def test_a_running_stack_serves_an_up_that_asks_for_no_more_than_it_has() -> None:
    store = {"endpoint": "http://10.99.0.1:8333", "access_key": "AK", "secret_key": "SK"}
    registry = {"url": "http://10.99.0.1:8081", "password": "pw"}
    demo = _running()
    full = _running(object_store=store, schema_registry=registry)
    three_brokers = _running(kafka_brokers=3)

    assert demo.serves()
    assert not demo.serves(object_store=True, schema_registry=True)
    assert full.serves(object_store=True, schema_registry=True)
    assert full.serves()  # its extra parts do not get in the way
    assert not full.serves(with_node=False)
    assert not full.serves(secured=True)
    assert not three_brokers.serves()
    assert three_brokers.serves(brokers=3)
