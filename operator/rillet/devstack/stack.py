"""The whole local stack: provision what is missing, start it, find it again, stop it.

The state of a running stack (process records, kubeconfig, Kafka bootstrap servers) is kept in
`state.json` in the state directory, so `rillet dev up` can reuse a running stack and
`rillet dev down` can stop it from another shell.
"""

from __future__ import annotations

import contextlib
import shutil
import ssl
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
from pydantic import BaseModel

from rillet.devstack import controlplane, paths, processes, provisioning, toolchain, versions
from rillet.devstack.controlplane import ControlPlaneLayout
from rillet.devstack.kafka import KafkaCluster
from rillet.devstack.processes import ProcessRecord

Reporter = Callable[[str], AbstractContextManager[None]]


@contextlib.contextmanager
def silent(_: str) -> Iterator[None]:
    """A reporter that reports nothing."""
    yield


class StackState(BaseModel):
    """What a running stack is made of and how to reach it."""

    processes: list[ProcessRecord]
    kubeconfig: Path
    apiserver: str
    kafka_bootstrap: str
    kafka_brokers: int
    kubernetes_version: str = versions.KUBERNETES

    def environment(self) -> dict[str, str]:
        """The variables a shell, kubectl, kopf or a test needs to use this stack."""
        return {"KUBECONFIG": str(self.kubeconfig), "RILLET_KAFKA_BOOTSTRAP": self.kafka_bootstrap}


def _state_file() -> Path:
    return paths.state_dir() / "state.json"


def load() -> StackState | None:
    """The recorded stack, running or not."""
    try:
        return StackState.model_validate_json(_state_file().read_text())
    except (OSError, ValueError):
        return None


def running() -> StackState | None:
    """The recorded stack if every one of its processes is alive."""
    state = load()
    if state and state.processes and all(processes.is_alive(p) for p in state.processes):
        return state
    return None


def up(*, brokers: int = 1, report: Reporter = silent) -> StackState:
    """Start the stack (reusing a running one with the same broker count) and return it."""
    current = running()
    if current and current.kafka_brokers == brokers:
        return current
    down()
    needed = provisioning.missing(provisioning.ALL)
    toolchain.require(provisioning.tools_for(needed) | {"java"})
    for artefact in needed:
        with report(f"build {artefact.name} v{artefact.version} (cached afterwards)"):
            provisioning.provision(artefact)
    return _start(brokers=brokers, report=report)


def _start(*, brokers: int, report: Reporter) -> StackState:
    root = paths.state_dir()
    shutil.rmtree(root, ignore_errors=True)  # every `up` starts an empty cluster
    layout = ControlPlaneLayout(root)
    kube_bin = provisioning.KUBERNETES.directory
    started: list[ProcessRecord] = []
    try:
        with report("etcd"):
            etcd, etcd_port = controlplane.start_etcd(provisioning.ETCD.directory / "etcd", layout)
            started.append(etcd)
        with report("kube-apiserver"):
            apiserver, port, token = controlplane.start_apiserver(
                kube_bin / "kube-apiserver", layout, etcd_port=etcd_port
            )
            started.append(apiserver)
        with report("kube-controller-manager"):
            manager = controlplane.start_controller_manager(
                kube_bin / "kube-controller-manager", layout
            )
            started.append(manager)
            _wait_default_service_account(manager, layout, port=port, token=token)
        with report(f"kafka ({brokers} broker{'s' if brokers > 1 else ''})"):
            cluster = KafkaCluster(
                libs=provisioning.KAFKA.directory / "libs",
                root=root / "kafka",
                brokers=brokers,
                heap="512m" if brokers == 1 else "384m",
            )
            kafka_records, bootstrap = cluster.start()
            started += kafka_records
    except BaseException:
        for record in reversed(started):
            processes.stop(record)
        raise
    state = StackState(
        processes=started,
        kubeconfig=layout.kubeconfig,
        apiserver=f"https://127.0.0.1:{port}",
        kafka_bootstrap=bootstrap,
        kafka_brokers=brokers,
    )
    _state_file().write_text(state.model_dump_json(indent=2))
    return state


def _wait_default_service_account(
    manager: ProcessRecord, layout: ControlPlaneLayout, *, port: int, token: str
) -> None:
    """The controller-manager is working once it has made namespace default's ServiceAccount."""
    verify = ssl.create_default_context(cafile=str(layout.pki / "ca.crt"))

    def default_service_account_exists() -> bool:
        response = httpx.get(
            f"https://127.0.0.1:{port}/api/v1/namespaces/default/serviceaccounts/default",
            headers={"Authorization": f"Bearer {token}"},
            verify=verify,
        )
        return response.status_code == 200

    processes.wait_ready(
        manager, default_service_account_exists, timeout=90, what="creating ServiceAccounts"
    )


def down() -> list[str]:
    """Stop every process of the recorded stack; return the names of those that were running."""
    state = load()
    if state is None:
        return []
    stopped = []
    # Reverse start order: Kafka first, etcd last, so nothing loses its backend while running.
    for record in reversed(state.processes):
        if processes.is_alive(record):
            processes.stop(record)
            stopped.append(record.name)
    _state_file().unlink(missing_ok=True)
    return stopped


def describe(state: StackState) -> list[tuple[str, int, bool]]:
    """(name, pid, alive) of each process of a stack."""
    return [(p.name, p.pid, processes.is_alive(p)) for p in state.processes]
