"""Integration fixtures: the real local stack (started once, or reused if already running).

A stack this session started is stopped at the end; one that was already running is left as it
was, so a developer's `rillet dev up` survives a test run.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from rillet.devstack import stack as devstack


@pytest.fixture(scope="session")
def stack() -> Iterator[devstack.StackState]:
    existing = devstack.running()
    state = existing or devstack.up(brokers=1)
    yield state
    if existing is None:
        devstack.down()


@dataclass(frozen=True)
class Kube:
    """The stack's Kubernetes API through the real kubectl."""

    kubeconfig: Path

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["kubectl", f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result


@pytest.fixture(scope="session")
def kube(stack: devstack.StackState) -> Kube:
    os.environ["KUBECONFIG"] = str(stack.kubeconfig)
    return Kube(kubeconfig=stack.kubeconfig)


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards (without waiting for it to go)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    kube.kubectl("create", "namespace", name)
    yield name
    kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="session")
def kafka_bootstrap(stack: devstack.StackState) -> str:
    return stack.kafka_bootstrap


@pytest.fixture(scope="session")
def kafka_admin(kafka_bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


@pytest.fixture
def topic_name() -> str:
    """A Kafka topic name no other test uses."""
    return f"t.{uuid.uuid4().hex[:12]}"


REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def crds(kube: Kube) -> None:
    """Rillet's CRDs, installed from crds/ as a user would."""
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    kube.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(REPO / "crds"))


@pytest.fixture(scope="session")
def operator(
    stack: devstack.StackState, crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[object]:
    """The operator, watching the namespaces of the `namespace` fixture (t-*), resync 3 s."""
    from rillet.devstack.operating import OperatorProcess

    process = OperatorProcess(
        kubeconfig=stack.kubeconfig,
        bootstrap=stack.kafka_bootstrap,
        namespace_pattern="t-*",
        log=tmp_path_factory.mktemp("operator") / "operator.log",
    )
    process.start()
    yield process
    process.stop()
