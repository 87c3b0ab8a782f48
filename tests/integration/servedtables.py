"""Served Tables on the node: `rillet table get` as a user runs it, and the server's readiness."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from .conftest import Kube
from .polling import wait_for

CLI = (sys.executable, "-m", "rillet.cli")


# Run in a pod: GET each URL with the pod's own ServiceAccount token (none for a URL ending in
# #no-token), print [[status, body], ...] as JSON; status 0 when no connection was made.
_ASK = """
import json, sys, urllib.error, urllib.request
token = open("/var/run/secrets/kubernetes.io/serviceaccount/token").read().strip()
answers = []
for url in sys.argv[1:]:
    url, _, anonymous = url.partition("#")
    headers = {} if anonymous else {"Authorization": "Bearer " + token}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            answers.append([r.status, r.read().decode()])
    except urllib.error.HTTPError as error:
        answers.append([error.code, error.read().decode()])
    except (urllib.error.URLError, OSError) as error:
        answers.append([0, f"{type(error).__name__}: {error}"])
print(json.dumps(answers))
"""


def _asking_pod(name: str, image: str, service_account: str, urls: Sequence[str]) -> dict[str, Any]:
    container = {
        "name": "ask",
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["python3", "-c", _ASK, *urls],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    spec = {"restartPolicy": "Never", "serviceAccountName": service_account}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {**spec, "containers": [container]},
    }


def asked_from_pods(
    kube: Kube, pods: Mapping[str, tuple[str, str, Sequence[str]]], image: str
) -> dict[str, list[list[Any]]]:
    """Each pod (name: namespace, ServiceAccount, URLs) GETs its URLs with its own token, all
    at once on the node; their answers by pod, [status, body] per URL."""
    for name, (namespace, account, urls) in pods.items():
        manifest = json.dumps(_asking_pod(name, image, account, urls))
        kube.kubectl("apply", "-n", namespace, "-f", "-", input=manifest)

    def phase(name: str, namespace: str) -> str:
        jsonpath = "jsonpath={.status.phase}"
        return kube.kubectl("get", "pod", name, "-n", namespace, "-o", jsonpath).stdout

    def finished(name: str, namespace: str) -> str | None:
        now = phase(name, namespace)
        return now if now in ("Succeeded", "Failed") else None

    answers = {}
    for name, (namespace, _, _) in pods.items():
        done = wait_for(
            lambda n=name, ns=namespace: finished(n, ns),  # type: ignore[misc]
            timeout=120,
            what=f"pod {namespace}/{name} to finish",
        )
        log = kube.kubectl("logs", name, "-n", namespace).stdout
        assert done == "Succeeded", log
        answers[name] = json.loads(log.strip().splitlines()[-1])
    return answers


def server_settings(operator_image: str) -> dict[str, str]:
    """An operator's settings that run Table servers on the node with the stack's image."""
    return {
        "RILLET_TABLE_SERVER_IMAGE": operator_image,
        "RILLET_TABLE_SERVER_IMAGE_PULL_POLICY": "Never",  # the node has it, no registry
    }


def table_get(
    kube: Kube, name: str, key: str, namespace: str, bootstrap: str | None
) -> subprocess.CompletedProcess[str]:
    """`rillet table get`, given Kafka's bootstrap servers or not (none in its environment)."""
    env = {k: v for k, v in os.environ.items() if k != "RILLET_KAFKA_BOOTSTRAP"}
    kafka = ["-b", bootstrap] if bootstrap else []
    return subprocess.run(
        [*CLI, "table", "get", name, key, "-n", namespace, *kafka],
        capture_output=True,
        text=True,
        env={**env, "KUBECONFIG": str(kube.kubeconfig)},
        timeout=120,
        check=False,
    )


def ready_replicas(kube: Kube, name: str, namespace: str) -> int:
    # The Table's status names its server (handlers.tables) apart from the handler that applies
    # the server's objects (handlers.tableserving): the Deployment may come a moment later.
    deployment = kube.api.read("deployment", name, namespace) or {}
    return int((deployment.get("status") or {}).get("readyReplicas") or 0)
