"""Running the real operator (`rillet operator run`) as a process, and reading what it did.

The operator runs as it does in production: its own process, the stack's kubeconfig, settings
from RILLET_* variables. Tests give each operator a namespace pattern so that operators started
by different tests never handle the same objects.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rillet.devstack import processes

from .conftest import Kube
from .polling import wait_for

REPO = Path(__file__).resolve().parents[2]


@dataclass
class OperatorProcess:
    """One `rillet operator run` process."""

    kubeconfig: Path
    bootstrap: str
    namespace_pattern: str
    log: Path
    settings: dict[str, str] = field(default_factory=dict)
    metrics_port: int = field(default_factory=processes.free_port)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "RILLET_KAFKA_BOOTSTRAP": self.bootstrap,
            "RILLET_RESYNC_SECONDS": "3",
            "RILLET_METRICS_PORT": str(self.metrics_port),
            "RILLET_HEALTH_PORT": "0",
            **self.settings,
        }
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "rillet.cli",
                    "operator",
                    "run",
                    "-n",
                    self.namespace_pattern,
                ],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def kill(self) -> None:
        """SIGKILL: no cleanup, no finalizer handling, like an OOM kill or a node loss."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def apply(kube: Kube, *manifests: dict[str, Any]) -> None:
    """kubectl apply --server-side, as a GitOps tool would."""
    kube.kubectl(
        "apply",
        "--server-side",
        "--field-manager=tests",
        "-f",
        "-",
        input=yaml.safe_dump_all(manifests),
    )


def get(kube: Kube, kind: str, name: str, namespace: str) -> dict[str, Any]:
    out = kube.kubectl("get", kind, name, "-n", namespace, "-o", "json").stdout
    return json.loads(out)  # type: ignore[no-any-return]


def exists(kube: Kube, kind: str, name: str, namespace: str) -> bool:
    result = kube.kubectl("get", kind, name, "-n", namespace, "-o", "name", check=False)
    return result.returncode == 0


def condition(obj: dict[str, Any], condition_type: str) -> dict[str, Any]:
    for found in (obj.get("status") or {}).get("conditions") or []:
        if found["type"] == condition_type:
            return found  # type: ignore[no-any-return]
    return {}


def wait_condition(
    kube: Kube,
    kind: str,
    name: str,
    namespace: str,
    *,
    condition_type: str = "Ready",
    status: str = "True",
    reason: str | None = None,
    timeout: float = 60,
) -> dict[str, Any]:
    """Wait until the object's condition has this status (and reason); return the object."""

    def probe() -> dict[str, Any] | None:
        obj = get(kube, kind, name, namespace)
        found = condition(obj, condition_type)
        generation = obj["metadata"].get("generation")
        current = (obj.get("status") or {}).get("observedGeneration") == generation
        matches = found.get("status") == status and (
            reason is None or found.get("reason") == reason
        )
        return obj if matches and current else None

    return wait_for(
        probe,
        timeout=timeout,
        what=f"{kind} {namespace}/{name} {condition_type}={status}"
        + (f" ({reason})" if reason else ""),
    )


def events(kube: Kube, namespace: str, name: str) -> list[dict[str, Any]]:
    out = kube.kubectl(
        "get",
        "events",
        "-n",
        namespace,
        "-o",
        "json",
        f"--field-selector=involvedObject.name={name}",
    ).stdout
    return json.loads(out)["items"]  # type: ignore[no-any-return]


def topic(name: str, namespace: str, *, partitions: int = 1, **spec: Any) -> dict[str, Any]:
    """A Topic manifest."""
    return {
        "apiVersion": "rillet.io/v1alpha1",
        "kind": "Topic",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"partitions": partitions, **spec},
    }
