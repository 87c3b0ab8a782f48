"""The chart's driver pod policy (templates/driverpods.yaml) on the stack, and pods as a driver
would ask for them.

The chart binds the policy to the namespaces its release watches (all by default). The tests
bind it to the namespaces of their own session (a label `new_namespace` gives them), so that
another session sharing the stack meanwhile is not held by this one's policy.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from rillet_devstack import provisioning

from . import isolation

CHART = Path(__file__).resolve().parents[2] / "charts" / "rillet"
SESSION_LABEL = "rillet.io/test-session"


def session_label() -> dict[str, str]:
    """The label of this session's namespaces."""
    return {SESSION_LABEL: isolation.SESSION}


def _rendered(release_namespace: str) -> list[dict[str, Any]]:
    helm = provisioning.provision(provisioning.HELM) / "helm"
    rendered = subprocess.run(
        [
            str(helm),
            *("template", "rillet", str(CHART), "--namespace", release_namespace),
            *("--show-only", "templates/driverpods.yaml"),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


@contextmanager
def installed(kube: Any, release_namespace: str) -> Iterator[None]:
    """The policy and its binding as `helm install` into `release_namespace` makes them
    (watching all namespaces), bound to this session's namespaces; removed afterwards."""
    documents = _rendered(release_namespace)
    for document in documents:
        if document["kind"] == "ValidatingAdmissionPolicyBinding":
            selector = {"matchLabels": session_label()}
            document["spec"]["matchResources"] = {"namespaceSelector": selector}
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": documents})
    kube.kubectl("apply", "-f", "-", input=manifest)
    try:
        yield
    finally:
        kube.kubectl("delete", "--ignore-not-found", "-f", "-", input=manifest)


def pod(app: str, *, role: str = "executor", **spec: Any) -> dict[str, Any]:
    """A pod labelled as App `app`'s, that no node will ever run (a selector none matches)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{app}-probe-",
            "labels": {"rillet.io/app": app, "rillet.io/role": role},
        },
        "spec": {
            "automountServiceAccountToken": False,
            "nodeSelector": {"rillet.io/no-such-node": "true"},
            "containers": [{"name": "c", "image": "rillet/spark-runtime:0.1.0"}],
            **spec,
        },
    }
