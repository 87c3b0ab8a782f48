"""Helm and the chart, for the chart's tests (test_chart*.py) and the node's: the helm the stack
built, what `helm template` renders, and an operator run with a release's ServiceAccount token
that reconciles a Topic and an App."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from rillet_devstack import provisioning
from rillet_devstack import stack as devstack
from rillet_devstack.controlplane import write_service_account_kubeconfig
from rillet_devstack.operating import OperatorProcess

from .conftest import REPO, RILLET_KINDS, Kube
from .objects import apply, events, exists, get, topic, wait_condition
from .polling import wait_for

CHART = REPO / "charts" / "rillet"
CI_VALUES = sorted((CHART / "ci").glob("*.yaml"))
# What the ClusterRole holds whatever the operator watches: kopf discovery, and the Nodes it
# reads to tell an App its driver or executors are on a lost node.
CLUSTER_SCOPED = {"namespaces", "customresourcedefinitions", "nodes"}
# The values of an install that watches every namespace (the chart's default is its own alone).
ANY = ("--set", "watchAnyNamespace=true")


class HelmError(subprocess.CalledProcessError):
    """A helm command that failed, with what it said (a failing test shows why)."""

    def __str__(self) -> str:
        return f"{super().__str__()}\n{self.stderr}"


def helm(kube: Kube, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(provisioning.HELM.directory / "helm"), f"--kubeconfig={kube.kubeconfig}", *args]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,  # `helm install --wait` of a pod that must start: up to 240 s
    )
    if result.returncode != 0:
        raise HelmError(result.returncode, command, output=result.stdout, stderr=result.stderr)
    return result


def rendered(kube: Kube, *args: str) -> list[dict[str, Any]]:
    """The objects `helm template` renders from the chart with `args`."""
    text = helm(kube, "template", "rillet", str(CHART), "--namespace", "ops", *args).stdout
    return [doc for doc in yaml.safe_load_all(text) if doc]


def operators_cluster_role(obj: dict[str, Any]) -> bool:
    """The operator's ClusterRole (not the drivers', `ops-rillet-operator-driver`)."""
    return bool(obj["kind"] == "ClusterRole" and obj["metadata"]["name"] == "ops-rillet-operator")


def operator_env(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    (deployment,) = (obj for obj in objects if obj["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {variable["name"]: variable for variable in container["env"]}


def reconcile_as_the_charts_operator(
    kube: Kube,
    stack: devstack.StackState,
    release: str,
    watched: str,
    *,
    kafka_prefix: str,
    tmp_path: Path,
) -> None:
    """The operator, with the release's ServiceAccount token, reconciles a Topic and an App in
    `watched`: no request of it is Forbidden."""
    as_operator = write_service_account_kubeconfig(
        kube.kubeconfig,
        tmp_path / "operator.kubeconfig",
        namespace=release,
        name="rillet-operator",
    )
    operator = OperatorProcess(
        kubeconfig=as_operator,
        bootstrap=stack.kafka_bootstrap,
        namespace_pattern=watched,
        log=tmp_path / "operator.log",
        # As the chart's Deployment sets it: the one ClusterRole the operator may bind.
        settings={"RILLET_APP_DRIVER_CLUSTER_ROLE": f"{release}-rillet-operator-driver"},
    )
    operator.start()
    try:
        name = f"{kafka_prefix}-rbac"
        apply(kube, topic(name, watched, partitions=2, deletionPolicy="Delete"))
        wait_condition(kube, "topic", name, watched)
        # kopf posts a handler's Events from a queue of its own, after the status patch.
        wait_for(
            lambda: "TopicCreated" in {e["reason"] for e in events(kube, watched, name)},
            timeout=30,
            what=f"the TopicCreated Event of {name}",
        )
        kube.kubectl("delete", "topic", name, "-n", watched, "--timeout=60s")

        app = f"{kafka_prefix}-app"
        apply(kube, topic(app, watched, partitions=2), counting_app(app, watched))
        wait_for(
            lambda: (
                exists(kube, "rolebinding", f"{app}-driver-rights", watched)
                and exists(kube, "statefulset", f"{app}-driver", watched)
            ),
            timeout=60,
            what="the App's objects applied with the chart's rights",
        )
        binding = get(kube, "rolebinding", f"{app}-driver-rights", watched)
        assert binding["roleRef"]["kind"] == "ClusterRole"
        assert binding["roleRef"]["name"] == f"{release}-rillet-operator-driver"
        desired = wait_for(
            lambda: (
                (get(kube, "app", app, watched).get("status") or {})
                .get("executors", {})
                .get("desired")
            ),
            timeout=60,
            what="the App scaled by the loop with the chart's rights",
        )
        # The count on the driver pod too (patched by the operator), where the driver reads it.
        driver = f"{app}-driver-0"
        wait_for(
            lambda: (
                exists(kube, "pod", driver, watched)
                and (get(kube, "pod", driver, watched)["metadata"].get("annotations") or {}).get(
                    "rillet.io/executors-desired"
                )
                == str(desired)
            ),
            timeout=60,
            what="the desired executor count on the driver pod",
        )
        assert "Forbidden" not in operator.log_text(), operator.log_text()[-3000:]
    finally:
        # While the operator runs, so it releases what it holds (`new_namespace` checks).
        kube.kubectl("delete", RILLET_KINDS, "--all", "-n", watched, "--timeout=60s", check=False)
        operator.stop()


def counting_app(name: str, namespace: str) -> dict[str, Any]:
    """An App reading the Topic `name` and writing it again (no Table: nothing else to wait for)."""
    return {
        "apiVersion": "rillet.io/v1alpha1",
        "kind": "App",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "image": "rillet/spark-runtime:0.1.0",
            "inputs": [{"name": "src", "topicRef": {"name": name}, "format": "string"}],
            "pipeline": {"sql": "SELECT value FROM src"},
            "outputs": [{"topicRef": {"name": name}}],
        },
    }
