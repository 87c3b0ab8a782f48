"""Who may talk to an App's Spark driver: strangers on the network and in the App, and what leaks.

The App's NetworkPolicy admits its own pods alone (the stack enforces policies:
rillet_devstack.networkpolicies), so a pod of another namespace, or one of the App's namespace
without the App's label, cannot even open the driver's RPC port (`opens`). Inside that fence
Spark's own authentication holds: a stranger is a real Spark executor backend (the runtime
image's own `spark-executor`, as Spark's pods start it) in a pod of the App's namespace wearing
the App's label, aimed at the driver's RPC port by pod IP. Its driver URL names an endpoint no
driver has (`NoSuchEndpoint`): a client that gets through authentication is told "Cannot find
endpoint", and nothing registers with the App. Three strangers, alike but for what they know of
the secret: none (Spark's defaults), a wrong one, and the App's own (read here, as the cluster's
admin, from the Secret): the last one's answer shows that the first two were refused for the
secret alone, not for an unreachable port.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Final

from rillet.reconcile.appobjects import pods

from .conftest import Kube
from .objects import get
from .polling import wait_for

# What an executor's JVM needs to talk to a driver of the App's settings (sparkauth.spark_conf).
_CRYPTO: Final = (
    "-Dspark.network.crypto.enabled=true",
    "-Dspark.network.crypto.cipher=AES/GCM/NoPadding",
    "-Dspark.network.crypto.authEngineVersion=2",
)
NOT_FOUND: Final = "Cannot find endpoint"


def stranger(
    name: str, *, image: str, driver_ip: str, secret: str | None, labels: dict[str, str]
) -> dict[str, Any]:
    """The pod of one stranger: `secret` None knows nothing of authentication."""
    options = [] if secret is None else ["-Dspark.authenticate=true", *_CRYPTO]
    if secret is not None:
        options.append(f"-Dspark.authenticate.secret={secret}")
    env = {
        "SPARK_DRIVER_URL": f"spark://NoSuchEndpoint@{driver_ip}:7078",
        "SPARK_EXECUTOR_ID": "stranger",
        "SPARK_EXECUTOR_CORES": "1",
        "SPARK_EXECUTOR_MEMORY": "256m",
        "SPARK_APPLICATION_ID": "stranger",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_POD_NAME": name,
        **{f"SPARK_JAVA_OPT_{n}": option for n, option in enumerate(options)},
    }
    pod_ip = {
        "name": "SPARK_EXECUTOR_POD_IP",
        "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
    }
    container = {
        "name": "executor",
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["/opt/rillet/bin/spark-executor", "executor"],
        "env": [*({"name": k, "value": v} for k, v in env.items()), pod_ip],
        "securityContext": pods.container_security_context(),
        "resources": {"limits": {"memory": "512Mi"}, "requests": {"memory": "512Mi"}},
    }
    return _pod(name, container, labels)


def _pod(name: str, container: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": pods.pod_security_context(),
            "automountServiceAccountToken": False,
            "containers": [container],
        },
    }


def _outputs(kube: Kube, namespace: str, names: list[str]) -> dict[str, str]:
    """The log of each pod once it ended (they run at once); the pods are then deleted."""

    def ended(name: str) -> bool:
        return get(kube, "pod", name, namespace)["status"].get("phase") in ("Succeeded", "Failed")

    wait_for(lambda: all(map(ended, names)), timeout=240, interval=2, what=f"{names} ended")
    said = {name: kube.kubectl("logs", "-n", namespace, name).stdout for name in names}
    kube.kubectl("delete", "pod", "-n", namespace, *names, "--wait=false")
    return said


def answers(
    kube: Kube, namespace: str, *, image: str, driver_ip: str, key: str, labels: dict[str, str]
) -> dict[str, str]:
    """What each stranger (in `namespace`, wearing `labels`) was told."""
    secrets = {"no-secret": None, "wrong-secret": base64.b64encode(b"w" * 32).decode(), "own": key}
    for name, secret in secrets.items():
        manifest = stranger(
            f"stranger-{name}", image=image, driver_ip=driver_ip, secret=secret, labels=labels
        )
        kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))
    said = _outputs(kube, namespace, [f"stranger-{name}" for name in secrets])
    return {name: said[f"stranger-{name}"] for name in secrets}


# Run in a pod: open a TCP connection, print how it went.
_OPEN = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10).close()
    print("opened")
except OSError as error:
    print(f"not opened: {type(error).__name__}: {error}")
"""


def opens(kube: Kube, where: dict[str, str], *, image: str, ip: str, port: int) -> dict[str, str]:
    """What a pod in each namespace of `where` (pod name: namespace), wearing no label, saw when
    it opened a TCP connection to `ip:port`."""
    for name, namespace in where.items():
        container = {
            "name": "open",
            "image": image,
            "imagePullPolicy": "Never",
            "command": ["python3", "-c", _OPEN, ip, str(port)],
            "securityContext": pods.container_security_context(),
            "resources": {"limits": {"memory": "64Mi"}, "requests": {"memory": "64Mi"}},
        }
        manifest = json.dumps(_pod(name, container, {}))
        kube.kubectl("apply", "-n", namespace, "-f", "-", input=manifest)
    return {
        name: _outputs(kube, namespace, [name])[name].strip() for name, namespace in where.items()
    }


def spark_key(kube: Kube, app: str, namespace: str) -> str:
    """The App's Spark key as Spark makes it of the driver's key file: base64 of its bytes (the
    Secret's `key`, as the apiserver stores it)."""
    secret = get(kube, "secret", f"{app}-spark-auth", namespace)
    key: str = secret["data"]["key"]
    assert len(base64.b64decode(key)) == 32
    return key


def places_holding(kube: Kube, namespace: str, text: str, *, logs_of: list[str]) -> list[str]:
    """Where `text` shows in the namespace besides its Secrets: every pod spec (env, args), every
    ConfigMap, Event and Rillet object (annotations, status), and the logs of `logs_of`."""
    kinds = (
        "pods",
        "configmaps",
        "events",
        "apps.rillet.io",
        "topics.rillet.io",
        "tables.rillet.io",
    )
    found = [
        kind
        for kind in kinds
        if text in kube.kubectl("get", kind, "-n", namespace, "-o", "json").stdout
    ]
    for pod in logs_of:
        if text in kube.kubectl("logs", "-n", namespace, pod, "--all-containers").stdout:
            found.append(f"log of {pod}")
    return found
