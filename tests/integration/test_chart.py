"""The Helm chart installs a working operator with exactly the rights it needs.

Test plan:
- `helm lint` passes and the chart's CRDs equal crds/ (generated from the models).
- `helm install` on the real apiserver creates the ServiceAccount, RBAC and Deployment; the
  Deployment gets a (Pending: no kubelet here) Pod wired to the Kafka settings and the
  credentials Secret, never to a literal password.
- the operator, run with the chart's ServiceAccount token (its RBAC, nothing more), reconciles
  a Topic to Ready, with status and Events written.
- `helm uninstall` keeps the CRDs (deleting them would delete every Topic, Table and App).
"""

from __future__ import annotations

import filecmp
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet.devstack import provisioning
from rillet.devstack import stack as devstack
from rillet.devstack.controlplane import write_service_account_kubeconfig
from rillet.devstack.operating import OperatorProcess

from .conftest import REPO, Kube
from .objects import apply, events, topic, wait_condition
from .polling import wait_for

CHART = REPO / "charts" / "rillet"


def helm(kube: Kube, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(provisioning.HELM.directory / "helm"), f"--kubeconfig={kube.kubeconfig}", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )


def test_chart_lints_and_carries_the_generated_crds(kube: Kube) -> None:
    assert "0 chart(s) failed" in helm(kube, "lint", str(CHART)).stdout
    comparison = filecmp.dircmp(REPO / "crds", CHART / "crds")
    assert comparison.left_list == comparison.right_list
    assert not comparison.diff_files


@pytest.fixture
def release(kube: Kube, crds: None) -> Iterator[str]:
    namespace = f"rillet-{uuid.uuid4().hex[:8]}"
    helm(
        kube,
        "install",
        "rillet",
        str(CHART),
        "--namespace",
        namespace,
        "--create-namespace",
        "--set",
        "kafka.bootstrapServers=kafka.example:9092",
        "--set",
        "kafka.securityProtocol=SASL_SSL",
        "--set",
        "kafka.saslMechanism=SCRAM-SHA-512",
        "--set",
        "kafka.credentialsSecret=kafka-credentials",
        "--set",
        "watchNamespaces={team-*}",
    )
    yield namespace
    helm(kube, "uninstall", "rillet", "--namespace", namespace)
    kube.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def test_install_creates_a_wired_operator_deployment(kube: Kube, release: str) -> None:
    pods = wait_for(
        lambda: json.loads(kube.kubectl("get", "pods", "-n", release, "-o", "json").stdout)[
            "items"
        ],
        timeout=60,
        what="the operator's Pod object",
    )
    container = pods[0]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["RILLET_KAFKA_BOOTSTRAP"]["value"] == "kafka.example:9092"
    assert env["RILLET_KAFKA_SASL_MECHANISM"]["value"] == "SCRAM-SHA-512"
    assert env["RILLET_KAFKA_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "kafka-credentials",
        "key": "password",
    }
    assert "value" not in env["RILLET_KAFKA_SASL_PASSWORD"]
    assert env["RILLET_NAMESPACES"]["value"] == "team-*"
    assert pods[0]["spec"]["serviceAccountName"] == "rillet-operator"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_operator_works_with_exactly_the_charts_rbac(
    kube: Kube, release: str, stack: devstack.StackState, tmp_path: Path
) -> None:
    as_operator = write_service_account_kubeconfig(
        kube.kubeconfig,
        tmp_path / "operator.kubeconfig",
        namespace=release,
        name="rillet-operator",
    )
    watched = f"team-{uuid.uuid4().hex[:8]}"
    kube.kubectl("create", "namespace", watched)
    operator = OperatorProcess(
        kubeconfig=as_operator,
        bootstrap=stack.kafka_bootstrap,
        namespace_pattern="team-*",
        log=tmp_path / "operator.log",
    )
    operator.start()
    try:
        name = f"rbac-{uuid.uuid4().hex[:8]}"
        apply(kube, topic(name, watched, partitions=2, deletionPolicy="Delete"))
        wait_condition(kube, "topic", name, watched)
        assert "TopicCreated" in {e["reason"] for e in events(kube, watched, name)}
        kube.kubectl("delete", "topic", name, "-n", watched, "--timeout=60s")
        assert "Forbidden" not in operator.log_text(), operator.log_text()[-3000:]
    finally:
        operator.stop()
        kube.kubectl("delete", "namespace", watched, "--wait=false", check=False)


def test_uninstall_keeps_the_crds(kube: Kube, crds: None) -> None:
    namespace = f"rillet-{uuid.uuid4().hex[:8]}"
    helm(kube, "install", "rillet", str(CHART), "--namespace", namespace, "--create-namespace")
    helm(kube, "uninstall", "rillet", "--namespace", namespace)
    kube.kubectl("delete", "namespace", namespace, "--wait=false")
    names = kube.kubectl("get", "crd", "-o", "name").stdout
    for plural in ("topics", "tables", "apps"):
        assert f"customresourcedefinition.apiextensions.k8s.io/{plural}.rillet.io" in names
