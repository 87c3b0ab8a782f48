"""The local Kubernetes control plane is real.

Test plan:
- /version reports the pinned release (the version ldflags were applied).
- a CRD applied with kubectl serves custom resources (a CRD of the test's own group, deleted
  afterwards).
- a Deployment gets a ReplicaSet and a Pod object (kube-controller-manager runs).
- deleting an owner garbage-collects its children.
- a ServiceAccount token is allowed what its Role grants and denied the rest (RBAC is on).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from rillet_devstack import node, versions
from rillet_devstack.controlplane import write_service_account_kubeconfig

from .conftest import Kube
from .polling import wait_for


def test_version_reports_pinned_release(kube: Kube) -> None:
    version = json.loads(kube.kubectl("get", "--raw", "/version").stdout)
    assert version["gitVersion"] == f"v{versions.KUBERNETES}"


WIDGET_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.GROUP}
spec:
  group: GROUP
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties: {size: {type: integer, minimum: 1}}
"""


@pytest.fixture
def widget_group(kube: Kube, kafka_prefix: str) -> Iterator[str]:
    """The group of a Widget CRD of the test's own, deleted afterwards."""
    group = f"{kafka_prefix}.test.rillet.io"
    kube.kubectl("apply", "-f", "-", input=WIDGET_CRD.replace("GROUP", group))
    yield group
    kube.kubectl("delete", "crd", f"widgets.{group}", "--timeout=60s", check=False)


def test_crd_serves_custom_resources(kube: Kube, namespace: str, widget_group: str) -> None:
    kube.kubectl("wait", "--for=condition=Established", f"crd/widgets.{widget_group}")
    widget = {
        "apiVersion": f"{widget_group}/v1",
        "kind": "Widget",
        "metadata": {"name": "w1", "namespace": namespace},
        "spec": {"size": 3},
    }
    kube.kubectl("apply", "-f", "-", input=yaml.safe_dump(widget))
    got = json.loads(kube.kubectl("get", "widget", "w1", "-n", namespace, "-o", "json").stdout)
    assert got["spec"] == {"size": 3}
    refused = kube.kubectl(
        "apply",
        "-f",
        "-",
        check=False,
        input=yaml.safe_dump({**widget, "spec": {"size": 0}}),
    )
    assert refused.returncode != 0
    assert "spec.size" in refused.stderr


def _names(kube: Kube, kind: str, namespace: str) -> list[str]:
    items = json.loads(kube.kubectl("get", kind, "-n", namespace, "-o", "json").stdout)["items"]
    return [item["metadata"]["name"] for item in items]


def test_deployment_gets_replicaset_and_pod_then_garbage_collected(
    kube: Kube, namespace: str
) -> None:
    create = ["create", "deployment", "web", "--image=example.invalid/web:1", "-n", namespace]
    web = json.loads(kube.kubectl(*create, "--dry-run=client", "-o", "json").stdout)
    # On node 1: a pod on node 2 is deleted only once node 2's kubelet confirms it, and the
    # node tests stop node 2 while this test may run beside them.
    web["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node.NODE_NAME}
    kube.kubectl("apply", "-f", "-", input=json.dumps(web))
    wait_for(lambda: len(_names(kube, "replicasets", namespace)) == 1, what="a ReplicaSet")
    wait_for(lambda: len(_names(kube, "pods", namespace)) == 1, what="a Pod object")

    kube.kubectl("delete", "deployment", "web", "-n", namespace, "--cascade=background")
    wait_for(
        lambda: not _names(kube, "replicasets", namespace) and not _names(kube, "pods", namespace),
        what="the garbage collector to delete the ReplicaSet and its Pod",
    )


def test_service_account_token_has_exactly_its_roles_rights(
    kube: Kube, namespace: str, tmp_path: Path
) -> None:
    kube.kubectl("create", "serviceaccount", "reader", "-n", namespace)
    kube.kubectl(
        "create",
        "role",
        "read-configmaps",
        "--verb=get,list",
        "--resource=configmaps",
        "-n",
        namespace,
    )
    kube.kubectl(
        "create",
        "rolebinding",
        "reader",
        "--role=read-configmaps",
        f"--serviceaccount={namespace}:reader",
        "-n",
        namespace,
    )
    reader = Kube(
        kubeconfig=write_service_account_kubeconfig(
            kube.kubeconfig, tmp_path / "reader.kubeconfig", namespace=namespace, name="reader"
        )
    )

    assert reader.kubectl("get", "configmaps", "-n", namespace).returncode == 0
    denied = reader.kubectl("get", "secrets", "-n", namespace, check=False)
    assert denied.returncode != 0
    assert f"system:serviceaccount:{namespace}:reader" in denied.stderr
    assert "forbidden" in denied.stderr.lower()
    cannot_write = reader.kubectl(
        "create", "configmap", "x", "--from-literal=a=b", "-n", namespace, check=False
    )
    assert cannot_write.returncode != 0
    assert "forbidden" in cannot_write.stderr.lower()
