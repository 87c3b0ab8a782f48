"""The local stack as recorded: what it is made of, how to reach it, whether it runs.

By default the stack has a worker node (`rillet_devstack.node`): pods run, from the project's own
images built from its Dockerfiles. `node=False` gives the control plane and Kafka alone, on
loopback, where pods stay Pending. Starting it is `starting`'s, stopping it `stopping`'s.

The state of a running stack (process records, kubeconfig, Kafka bootstrap servers, what the
node changed on the host) is kept in `state.json` in the state directory, so `rillet dev up` can
reuse a running stack and `rillet dev down` can stop it from another shell.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rillet_devstack import (
    controlplane,
    extranoderunning,
    extranodes,
    hostcleanup,
    node,
    nodechecking,
    noderunning,
    paths,
    processes,
    versions,
)
from rillet_devstack.controlplane import ControlPlaneLayout
from rillet_devstack.kafka import KafkaSecurity
from rillet_devstack.objectstore import ObjectStoreState
from rillet_devstack.processes import ProcessRecord
from rillet_devstack.schemaregistry import SchemaRegistryState


class NodeState(BaseModel):
    """The worker node: where it keeps its files, its images, and what it changed on the host."""

    name: str = node.NODE_NAME
    address: str = node.NODE_ADDRESS
    root: Path
    containerd_socket: Path
    sysctls: dict[str, str]
    preexisting_paths: list[Path]
    images: dict[str, str] = {}
    # The project's images by the names the chart and the examples give them (images.CHART_*).
    chart_images: dict[str, str] = {}


class ExtraNodeState(BaseModel):
    """An extra node (extranodes): where it keeps its files, its anchor process (the parent of
    its daemons), and whether `rillet dev node stop` stopped it."""

    index: int
    name: str
    address: str
    root: Path
    anchor: ProcessRecord | None = None
    stopped: bool = False

    @property
    def running(self) -> bool:
        return not self.stopped and self.anchor is not None and processes.is_alive(self.anchor)


class StackState(BaseModel):
    """What a running stack is made of and how to reach it."""

    processes: list[ProcessRecord]
    kubeconfig: Path
    apiserver: str
    kafka_bootstrap: str
    kafka_brokers: int
    kubernetes_version: str = versions.KUBERNETES
    node: NodeState | None = None
    extra_nodes: list[ExtraNodeState] = []
    kafka_security: KafkaSecurity | None = None
    object_store: ObjectStoreState | None = None
    schema_registry: SchemaRegistryState | None = None

    def serves(
        self,
        *,
        brokers: int = 1,
        with_node: bool = True,
        secured: bool = False,
        object_store: bool = False,
        schema_registry: bool = False,
    ) -> bool:
        """Whether `rillet dev up` with these options reuses this stack (running) as it is:
        the same Kafka and node, and at least the object store and registry asked for."""
        return (
            self.kafka_brokers == brokers
            and (self.node is not None) == with_node
            and (self.kafka_security is not None) == secured
            and (self.object_store is not None or not object_store)
            and (self.schema_registry is not None or not schema_registry)
        )

    def environment(self) -> dict[str, str]:
        """The variables a shell, kubectl, kopf or a test needs to use this stack (with
        security, the admin's credentials, and each App its own principal: `rillet operator
        run` then connects, and runs Apps, as the chart's operator does with
        kafka.appPrincipals)."""
        variables = {
            "KUBECONFIG": str(self.kubeconfig),
            "RILLET_KAFKA_BOOTSTRAP": self.kafka_bootstrap,
        }
        if self.kafka_security is not None:
            variables |= self.kafka_security.operator_environment()
        if self.node is not None and self.node.chart_images:
            variables |= {
                "RILLET_OPERATOR_IMAGE": self.node.chart_images["operator"],
                "RILLET_RUNTIME_IMAGE": self.node.chart_images["runtime"],
            }
        if self.object_store is not None:
            variables |= self.object_store.environment()
        if self.schema_registry is not None:
            variables |= self.schema_registry.environment()
        return variables

    def kafka_client_config(self) -> dict[str, Any]:
        """librdkafka settings of an admin client of the stack's Kafka."""
        secured = self.kafka_security.client_config() if self.kafka_security else {}
        return {"bootstrap.servers": self.kafka_bootstrap, **secured}


def state_file() -> Path:
    """Where the recorded stack is kept."""
    return paths.state_dir() / "state.json"


def load() -> StackState | None:
    """The recorded stack, running or not."""
    try:
        return StackState.model_validate_json(state_file().read_text())
    except (OSError, ValueError):
        return None


def running() -> StackState | None:
    """The recorded stack if every one of its processes is alive."""
    state = load()
    if state and state.processes and all(processes.is_alive(p) for p in state.processes):
        return state
    return None


def record_started(state: StackState, *records: ProcessRecord) -> None:
    """Record started processes at once, so a failed or interrupted `up` is undone by `down`."""
    state.processes += records
    save(state)


def save(state: StackState) -> None:
    """Record the stack as it is now: written whole beside the record, then renamed over it, so
    a reader in another process (a test, `rillet dev status`) never reads half a record (and
    takes the stack for stopped)."""
    record = state_file()
    record.parent.mkdir(parents=True, exist_ok=True)
    partial = record.with_name(f".{record.name}.{os.getpid()}")
    partial.unlink(missing_ok=True)
    # 0600: a secured stack's admin password is in it.
    with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
        out.write(state.model_dump_json(indent=2))
    partial.replace(record)


def describe(state: StackState) -> list[tuple[str, int, bool]]:
    """(name, pid, alive) of each process of a stack."""
    return [(p.name, p.pid, processes.is_alive(p)) for p in state.processes]


def describe_nodes(state: StackState) -> list[str]:
    """Each node's readiness and its pods, one line each (as `rillet dev status` prints them)."""
    assert state.node is not None
    core = controlplane.core_api(ControlPlaneLayout(state.kubeconfig.parent))
    pods = core.list_pod_for_all_namespaces().items
    nodes = [(state.node.name, state.node.address, False)]
    nodes += [(extra.name, extra.address, not extra.running) for extra in state.extra_nodes]
    lines = []
    registered = {node.metadata.name: node for node in core.list_node().items}
    for name, address, stopped in nodes:
        found = registered.get(name)
        if found is None:  # its start failed before its kubelet registered it
            lines.append(f"node {name} {address} not registered{' stopped' if stopped else ''}")
            continue
        conditions = found.status.conditions or []
        ready = next((c.status for c in conditions if c.type == "Ready"), "Unknown")
        lines.append(f"node {name} {address} Ready={ready}{' stopped' if stopped else ''}")
        serialized = core.api_client.sanitize_for_serialization(found)
        lines += [f"  takes no pods: {reason}" for reason in nodechecking.why_pods_wait(serialized)]
        lines += [
            f"  pod {pod.metadata.namespace}/{pod.metadata.name} {pod.status.phase}"
            for pod in pods
            if pod.spec.node_name == name
        ]
    unscheduled = [pod for pod in pods if not pod.spec.node_name]
    if unscheduled:
        lines.append("not on a node yet")
        lines += [f"  pod {p.metadata.namespace}/{p.metadata.name} Pending" for p in unscheduled]
    listed = core.api_client.sanitize_for_serialization(pods)
    if unattended := nodechecking.unattended_pods(listed, now=datetime.now(UTC)):
        lines.append(f"pods waiting over a minute for: {', '.join(unattended)}")
    return lines


def leftovers(state: StackState) -> list[str]:
    """What a stopped stack still has on the machine (empty when `down` cleaned up fully)."""
    found = [f"process {p.name} (pid {p.pid})" for p in state.processes if processes.is_alive(p)]
    if state.node is None:
        return found
    created = [p for p in node.FIXED_PATHS if p not in state.node.preexisting_paths]
    found += [f"mount {m}" for m in hostcleanup.node_mounts([state.node.root, *created])]
    found += [
        f"link {n}" for n in (node.POD_BRIDGE, node.HOST_BRIDGE) if noderunning.link_exists(n)
    ]
    found += [f"iptables chain {c}" for c in hostcleanup.remaining_chains()]
    now = noderunning.read_sysctls()
    found += [
        f"sysctl {name}={now.get(name)} (was {value})"
        for name, value in state.node.sysctls.items()
        if now.get(name) != value
    ]
    found += [f"path {p}" for p in created if p.exists()]
    shims = hostcleanup.processes_mentioning(str(state.node.containerd_socket))
    found += [f"process {pid} of containerd" for pid in shims]
    for index in range(2, extranodes.MAX_NODES + 1):
        found += extranoderunning.leftovers(extranodes.extra_node(index))
    return found
