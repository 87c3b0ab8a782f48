"""An App driver's rights: its real ServiceAccount token asked, the chart's driver pod policy
in force.

These need no running pod (the driver pod may stay Pending): what is checked is what the
operator writes, and the apiserver's own answers.

Test plan:
- the driver's real ServiceAccount token (bound to the chart's driver ClusterRole) can create
  and delete pods and watch its own pod in its namespace, where the operator writes its desired
  executor count, and cannot read Secrets, create Roles, touch another namespace, or read any
  App;
- with the chart's driver pod policy, that token creates only its App's executor pods (no
  token, host path or privileged container) and deletes or changes no other App's pod, where
  RBAC alone lets it create any pod.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from rillet.runtime.pod import incluster
from rillet_devstack.controlplane import write_service_account_kubeconfig

from . import driverpolicy
from .conftest import Kube, Unique
from .objects import (
    applied_app,
    exists,
    get,
)
from .polling import wait_for


def can_i(kubeconfig: Path, *args: str) -> bool:
    kube = Kube(kubeconfig=kubeconfig)
    result = kube.kubectl("auth", "can-i", *args, check=False)
    answer = result.stdout.strip()
    assert answer.startswith(("yes", "no")), (answer, result.stderr)
    return answer.startswith("yes")


@pytest.mark.usefixtures("operator")
def test_driver_service_account_has_exactly_its_rights(
    kube: Kube, namespace: str, unique: Unique, tmp_path: Path
) -> None:
    name, _ = applied_app(kube, namespace, unique)
    wait_for(
        lambda: exists(kube, "rolebinding", f"{name}-driver-rights", namespace),
        what="RoleBinding",
    )
    driver = write_service_account_kubeconfig(
        kube.kubeconfig, tmp_path / "driver.kubeconfig", namespace=namespace, name=f"{name}-driver"
    )
    other = f"t-{uuid.uuid4().hex[:10]}"  # never created: rights are checked, not objects

    assert can_i(driver, "create", "pods", "-n", namespace)
    assert can_i(driver, "delete", "pods", "-n", namespace)
    assert can_i(driver, "patch", "pods", "-n", namespace)
    assert can_i(driver, "create", "configmaps", "-n", namespace)
    assert not can_i(driver, "get", f"apps.rillet.io/{name}", "-n", namespace)
    assert not can_i(driver, "get", "secrets", "-n", namespace)
    assert not can_i(driver, "list", "secrets", "-n", namespace)
    assert not can_i(driver, "create", "pods", "-n", other)
    assert not can_i(driver, "get", "pods", "-n", other)
    assert not can_i(driver, "get", "apps.rillet.io/someone-else", "-n", namespace)
    assert not can_i(driver, "patch", f"apps.rillet.io/{name}", "-n", namespace)
    assert not can_i(driver, "create", "roles", "-n", namespace)
    assert not can_i(driver, "create", "rolebindings", "-n", namespace)
    assert not can_i(driver, "list", "nodes")
    # The driver's watch of its own pod (a field selector on its name), with its own token:
    # the operator writes there the count it decided, as in the App's status.
    pod = f"{name}-driver-0"
    wait_for(lambda: exists(kube, "pod", pod, namespace), what=f"pod {pod}")
    seen = wait_for(
        lambda: _watched_count(driver, namespace, pod),
        timeout=60,
        what="the desired executor count on the driver pod",
    )
    status = get(kube, "app", name, namespace)["status"]["executors"]
    assert seen == status["desired"] >= 1, (seen, status)
    with pytest.raises(ApiException) as refused:
        _watched_count(driver, other, pod)
    assert refused.value.status == 403


@pytest.mark.usefixtures("operator")
def test_the_chart_holds_a_drivers_pod_requests_to_its_own_executors(
    kube: Kube, namespace: str, unique: Unique, tmp_path: Path
) -> None:
    """RBAC lets a driver create and delete any pod of its namespace; the chart's admission
    policy (installed with the session's operator, `driverpolicy`) holds it to its App's
    executors, with its real token."""
    name, _ = applied_app(kube, namespace, unique)
    wait_for(
        lambda: exists(kube, "rolebinding", f"{name}-driver-rights", namespace),
        what="RoleBinding",
    )
    as_driver = Kube(
        kubeconfig=write_service_account_kubeconfig(
            kube.kubeconfig,
            tmp_path / "driver.kubeconfig",
            namespace=namespace,
            name=f"{name}-driver",
        )
    )
    theirs = kube.kubectl(
        "create",
        "-n",
        namespace,
        "-o",
        "name",
        "-f",
        "-",
        input=json.dumps(driverpolicy.pod("other")),
    ).stdout.strip()

    def attempt(*args: str, manifest: dict[str, Any] | None = None) -> str:
        """What the apiserver answers the driver (dry run: nothing is made or deleted)."""
        result = as_driver.kubectl(
            *args,
            "--dry-run=server",
            "-n",
            namespace,
            *(("-f", "-") if manifest else ()),
            input=json.dumps(manifest) if manifest else None,
            check=False,
        )
        return "allowed" if result.returncode == 0 else result.stderr

    hostpath: list[dict[str, Any]] = [{"name": "root", "hostPath": {"path": "/"}}]
    kube.kubectl("create", "serviceaccount", "someone-else", "-n", namespace)
    assert can_i(as_driver.kubeconfig, "create", "pods", "-n", namespace)  # RBAC: any pod
    wait_for(
        lambda: "only its own App" in attempt("create", manifest=driverpolicy.pod("other")),
        timeout=60,
        what="the admission policy in force",
    )
    assert attempt("create", manifest=driverpolicy.pod(name)) == "allowed"
    refusals = {
        "a driver pod": driverpolicy.pod(name, role="driver"),
        "with a token": driverpolicy.pod(name, automountServiceAccountToken=True),
        "on the host": driverpolicy.pod(name, volumes=hostpath),
        "privileged": driverpolicy.pod(
            name,
            initContainers=[{"name": "i", "image": "x", "securityContext": {"privileged": True}}],
        ),
        "as another account": driverpolicy.pod(name, serviceAccountName="someone-else"),
        "with a projected token": driverpolicy.pod(
            name,
            volumes=[
                {"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}
            ],
        ),
        "mounting a Secret": driverpolicy.pod(
            name, volumes=[{"name": "s", "secret": {"secretName": "other-kafka"}}]
        ),
        "with another App's key": driverpolicy.pod(name, containers=[_reading("other-spark-auth")]),
    }
    said = {what: attempt("create", manifest=manifest) for what, manifest in refusals.items()}
    assert "may create only executor pods" in said["a driver pod"], said
    assert "mounts no ServiceAccount token" in said["with a token"], said
    assert "mounts no host path" in said["on the host"], said
    assert "runs no privileged container" in said["privileged"], said
    assert "runs as its App's ServiceAccount" in said["as another account"], said
    assert "no projected volume" in said["with a projected token"], said
    assert "mounts no Secret" in said["mounting a Secret"], said
    assert "no Secret that Rillet made for another App" in said["with another App's key"], said
    # Its own key, and Secrets Rillet did not make, are the App's to read.
    for secret in (f"{name}-spark-auth", "objectstore"):
        reading = driverpolicy.pod(name, containers=[_reading(secret)])
        assert attempt("create", manifest=reading) == "allowed", secret
    assert "only its own App" in attempt("delete", theirs)
    assert "only its own App" in attempt("label", theirs, "x=y")
    # Relabelled into this App in the same change: judged by the pod before it too.
    assert "change only its own App" in attempt(
        "label", "--overwrite", theirs, f"rillet.io/app={name}"
    )


def _reading(secret: str) -> dict[str, Any]:
    """A container reading a key of Secret `secret` into its environment."""
    ref = {"secretKeyRef": {"name": secret, "key": "k"}}
    return {"name": "c", "image": "x", "env": [{"name": "K", "valueFrom": ref}]}


def _watched_count(kubeconfig: Path, namespace: str, pod: str) -> int | None:
    """The first desired executor count the driver's watch of pod `pod` sees."""
    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    access = incluster.KubeAccess(api, namespace=namespace, pod_name=pod)
    try:
        return next(access.watch_desired(timeout_seconds=5))
    finally:
        access.close()
