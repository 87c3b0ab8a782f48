"""The whole local stack: provision what is missing, start it, find it again, stop it.

By default the stack has a worker node (`rillet_devstack.node`): pods run, from the project's own
images built from its Dockerfiles. `node=False` gives the control plane and Kafka alone, on
loopback, where pods stay Pending.

The state of a running stack (process records, kubeconfig, Kafka bootstrap servers, what the
node changed on the host) is kept in `state.json` in the state directory, so `rillet dev up` can
reuse a running stack and `rillet dev down` can stop it from another shell.
"""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel

from rillet_devstack import (
    controlplane,
    debootstrapping,
    hostcleanup,
    images,
    importing,
    node,
    nodechecking,
    noderunning,
    packages,
    paths,
    pki,
    processes,
    provisioning,
    reporting,
    toolchain,
    versions,
)
from rillet_devstack.controlplane import ControlPlaneLayout
from rillet_devstack.kafka import KafkaCluster, KafkaSecurity, secure
from rillet_devstack.processes import ProcessRecord

# The repository this stack builds images from (an editable install: operator/rillet_devstack).
REPOSITORY = Path(__file__).resolve().parents[2]


class NodeState(BaseModel):
    """The worker node: where it keeps its files, its images, and what it changed on the host."""

    name: str = node.NODE_NAME
    address: str = node.NODE_ADDRESS
    root: Path
    containerd_socket: Path
    sysctls: dict[str, str]
    preexisting_paths: list[Path]
    images: dict[str, str] = {}


class StackState(BaseModel):
    """What a running stack is made of and how to reach it."""

    processes: list[ProcessRecord]
    kubeconfig: Path
    apiserver: str
    kafka_bootstrap: str
    kafka_brokers: int
    kubernetes_version: str = versions.KUBERNETES
    node: NodeState | None = None
    kafka_security: KafkaSecurity | None = None

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
        return variables

    def kafka_client_config(self) -> dict[str, Any]:
        """librdkafka settings of an admin client of the stack's Kafka."""
        secured = self.kafka_security.client_config() if self.kafka_security else {}
        return {"bootstrap.servers": self.kafka_bootstrap, **secured}


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


class NodeUnavailableError(RuntimeError):
    """This machine cannot run the worker node; the message says why and what to use instead."""


def up(
    *,
    brokers: int = 1,
    with_node: bool = True,
    secured: bool = False,
    report: reporting.Reporter = reporting.silent,
) -> StackState:
    """Start the stack (reusing a running one of the same shape) and return it.

    `secured`: Kafka on SASL_SSL with SCRAM users and ACLs enforced (see devstack.kafka).
    """
    current = running()
    if (
        current
        and current.kafka_brokers == brokers
        and (current.node is not None) == with_node
        and (current.kafka_security is not None) == secured
    ):
        # Another checkout may have started it: what follows the checkout is made for this one.
        _provision(provisioning.CHECKOUT_ARTEFACTS, report=report)
        return with_current_images(current, report=report)
    if with_node and (reason := nodechecking.can_run_node()):
        raise NodeUnavailableError(
            f"{reason}; `rillet dev up --no-node` starts the stack without it"
        )
    if with_node and (wanted := packages.missing_packages()):
        with report(f"install {' '.join(wanted)} (apt, once)"):
            packages.ensure_installed(wanted, log=paths.cache_dir() / "apt-install.log")
    down()
    _provision(provisioning.artefacts(with_node=with_node), report=report)
    return _start(brokers=brokers, with_node=with_node, secured=secured, report=report)


def _provision(artefacts: Iterable[provisioning.Artefact], *, report: reporting.Reporter) -> None:
    """Build those of the artefacts that are not cached yet, each shown as a step."""
    needed = provisioning.missing(artefacts)
    toolchain.require(provisioning.tools_for(needed) | {"java"})
    for artefact in needed:
        with report(f"build {artefact.name} v{artefact.version} (cached afterwards)") as update:
            provisioning.provision(artefact, update or reporting.no_progress)


def _start(
    *, brokers: int, with_node: bool, secured: bool, report: reporting.Reporter
) -> StackState:
    root = paths.state_dir()
    noderunning.empty_state_dir(root)
    layout = ControlPlaneLayout(root)
    address = node.NODE_ADDRESS if with_node else "127.0.0.1"
    state = StackState(
        processes=[],
        kubeconfig=layout.kubeconfig,
        apiserver="",
        kafka_bootstrap="",
        kafka_brokers=brokers,
    )
    if with_node:
        node_layout = node.NodeLayout(root / "node")
        state.node = NodeState(
            root=node_layout.root,
            containerd_socket=node_layout.containerd_socket,
            sysctls=noderunning.read_sysctls(),
            preexisting_paths=noderunning.existing_fixed_paths(),
        )
    try:
        _start_control_plane(state, layout, address=address, report=report)
        if with_node:
            _start_node(state, layout, report=report)
        listener = "SASL_SSL, SCRAM-SHA-512, ACLs" if secured else "PLAINTEXT"
        with report(f"kafka ({brokers} broker{'s' if brokers > 1 else ''}, {listener})"):
            if secured:
                authority = pki.ControlPlanePki(layout.pki)
                state.kafka_security = secure(authority, host=address)
            cluster = KafkaCluster(
                libs=provisioning.KAFKA.directory / "libs",
                root=root / "kafka",
                brokers=brokers,
                heap="512m" if brokers == 1 else "384m",
                host=address,
                security=state.kafka_security,
            )
            kafka_records, state.kafka_bootstrap = cluster.start()
            _started(state, *kafka_records)
    except BaseException:
        _stop(state)
        raise
    return state


def _started(state: StackState, *records: ProcessRecord) -> None:
    """Record started processes at once, so a failed or interrupted `up` is undone by `down`."""
    state.processes += records
    _save(state)


def _save(state: StackState) -> None:
    _state_file().parent.mkdir(parents=True, exist_ok=True)
    _state_file().touch(mode=0o600)  # a secured stack's admin password is in it
    _state_file().write_text(state.model_dump_json(indent=2))


def _start_control_plane(
    state: StackState, layout: ControlPlaneLayout, *, address: str, report: reporting.Reporter
) -> None:
    kube_bin = provisioning.KUBERNETES.directory
    with_node = state.node is not None
    if with_node:
        with report("node address"):
            noderunning.create_host_bridge()
    with report("etcd"):
        etcd, etcd_port = controlplane.start_etcd(provisioning.ETCD.directory / "etcd", layout)
        _started(state, etcd)
    with report("kube-apiserver"):
        apiserver, port, token = controlplane.start_apiserver(
            kube_bin / "kube-apiserver",
            layout,
            etcd_port=etcd_port,
            address=address,
            with_node=with_node,
        )
        state.apiserver = f"https://{address}:{port}"
        _started(state, apiserver)
    with report("kube-controller-manager"):
        manager = controlplane.start_controller_manager(
            kube_bin / "kube-controller-manager", layout, with_node=with_node
        )
        _started(state, manager)
        _wait_default_service_account(manager, layout, server=state.apiserver, token=token)


def _start_node(
    state: StackState, layout: ControlPlaneLayout, *, report: reporting.Reporter
) -> None:
    """Scheduler, containerd with the stack's images, kubelet, kube-proxy, DNS, storage."""
    assert state.node is not None
    node_layout = node.NodeLayout(state.node.root)
    node_bin = provisioning.KUBERNETES_NODE.directory
    with report("kube-scheduler"):
        _started(state, noderunning.start_scheduler(node_bin / "kube-scheduler", layout))
    with report("containerd"):
        _started(
            state,
            noderunning.start_containerd(
                node_layout, sandbox_image=versions.PAUSE_IMAGE, logs=layout.logs
            ),
        )
    state.node.images = _images(node_layout, report=report)
    # Checked once the images are in, as they take the most: a node short of disk would start,
    # report Ready, and leave every pod Pending behind a DiskPressure taint.
    if short := nodechecking.too_little_disk(node_layout.root):
        raise NodeUnavailableError(f"{short}; free some space and run `rillet dev up` again")
    with report("kubelet"):
        kubelet = noderunning.start_kubelet(
            node_bin / "kubelet", layout, node_layout, server=state.apiserver
        )
        _started(state, kubelet)
        processes.wait_ready(
            kubelet, lambda: _node_ready(layout), timeout=90, what=f"{node.NODE_NAME} Ready"
        )
    with report("kube-proxy, CoreDNS"):
        _started(state, noderunning.start_kube_proxy(node_bin / "kube-proxy", layout, node_layout))
        _started(
            state,
            noderunning.start_coredns(
                provisioning.COREDNS.directory / "coredns", layout, node_layout
            ),
        )
    with report(f"StorageClass {node.STORAGE_CLASS} (local-path provisioner)"):
        _apply(
            layout,
            node.build_local_path_objects(
                helper_image=versions.BASE_IMAGE, volumes=node_layout.volumes
            ),
        )
        _started(
            state,
            noderunning.start_local_path_provisioner(
                provisioning.LOCAL_PATH.directory / "local-path-provisioner",
                layout,
                helper_image=versions.BASE_IMAGE,
            ),
        )


def with_current_images(
    state: StackState, *, report: reporting.Reporter = reporting.silent
) -> StackState:
    """A reused stack runs the images of the sources as they are now: changed Dockerfiles or
    operator code are rebuilt (unchanged ones cost a content hash) and imported."""
    if state.node is None:
        return state
    socket = node.NodeLayout(state.node.root).containerd_socket
    built = images.build_project_images(REPOSITORY, report=report)
    for name, image in built.items():
        if state.node.images.get(name) != image:
            importing.import_into_containerd(image, socket=socket, report=report)
    if built != state.node.images:
        state.node.images = built
        _save(state)
    return state


def _images(node_layout: node.NodeLayout, *, report: reporting.Reporter) -> dict[str, str]:
    """Build (or find cached) the pause, base and project images; import them into containerd.

    The image builds report each of their steps themselves (one span at a time)."""
    socket = node_layout.containerd_socket
    for image in (images.build_pause(report=report), debootstrapping.build_base(report=report)):
        importing.import_into_containerd(image, socket=socket, report=report)
    built = images.build_project_images(REPOSITORY, report=report)
    for image in built.values():
        importing.import_into_containerd(image, socket=socket, report=report)
    importing.remove_stale_images(
        [versions.PAUSE_IMAGE, versions.BASE_IMAGE, *built.values()], socket=socket
    )
    return built


def _api(layout: ControlPlaneLayout) -> Any:
    from kubernetes import config

    return config.new_client_from_config(config_file=str(layout.kubeconfig))  # type: ignore[no-untyped-call]


def _core(layout: ControlPlaneLayout) -> Any:
    """The core/v1 API as the stack's admin (untyped: the stack reads a handful of fields)."""
    from kubernetes import client

    return client.CoreV1Api(_api(layout))


def _node_ready(layout: ControlPlaneLayout) -> bool:
    found = _core(layout).read_node(node.NODE_NAME)
    return any(c.type == "Ready" and c.status == "True" for c in found.status.conditions or [])


def _apply(layout: ControlPlaneLayout, objects: list[dict[str, Any]]) -> None:
    from kubernetes import utils

    api = _api(layout)
    for item in objects:
        utils.create_from_dict(api, item)  # type: ignore[no-untyped-call]


def _wait_default_service_account(
    manager: ProcessRecord, layout: ControlPlaneLayout, *, server: str, token: str
) -> None:
    """The controller-manager is working once it has made namespace default's ServiceAccount."""
    verify = ssl.create_default_context(cafile=str(layout.pki / "ca.crt"))

    def default_service_account_exists() -> bool:
        response = httpx.get(
            f"{server}/api/v1/namespaces/default/serviceaccounts/default",
            headers={"Authorization": f"Bearer {token}"},
            verify=verify,
        )
        return response.status_code == 200

    processes.wait_ready(
        manager, default_service_account_exists, timeout=90, what="creating ServiceAccounts"
    )


def down() -> list[str]:
    """Stop every process of the recorded stack and undo what its node changed on the host;
    return the names of the processes that were running."""
    state = load()
    if state is None:
        return []
    stopped = _stop(state)
    _state_file().unlink(missing_ok=True)
    return stopped


def _stop(state: StackState) -> list[str]:
    stopped: list[str] = []
    by_name = {record.name: record for record in state.processes}

    def stop(name: str) -> None:
        record = by_name.pop(name, None)
        if record and processes.is_alive(record):
            processes.stop(record)
            stopped.append(name)

    if state.node is not None:
        # No new pods may start while the running ones are taken down with their networks.
        stop("kube-scheduler")
        _delete_pods(state, ControlPlaneLayout(state.kubeconfig.parent))
        for name in ("kubelet", "kube-proxy", "coredns", "local-path-provisioner"):
            stop(name)
        containerd = by_name.get("containerd")
        if containerd is not None and processes.is_alive(containerd):
            noderunning.release_image_store(node.NodeLayout(state.node.root))
        stop("containerd")
    # Reverse start order for the rest: Kafka first, etcd last.
    for record in reversed(state.processes):
        stop(record.name)
    if state.node is not None:
        _clean_host(state.node)
    return stopped


def _delete_pods(state: StackState, layout: ControlPlaneLayout) -> None:
    """Delete every pod and wait (bounded) until containerd runs none: kubelet tears down each
    sandbox with its CNI network, which nothing does once kubelet is gone."""
    assert state.node is not None
    socket = state.node.containerd_socket
    try:
        core = _core(layout)
        for pod in core.list_pod_for_all_namespaces().items:
            core.delete_namespaced_pod(
                pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
            )
    except Exception:  # an apiserver already gone: the sweep below still cleans the host
        return

    def no_sandboxes() -> bool:
        listed = subprocess.run(
            ["ctr", "-a", str(socket), "-n", "k8s.io", "tasks", "ls", "-q"],
            capture_output=True,
            text=True,
            check=False,
        )
        return listed.returncode != 0 or not listed.stdout.strip()

    hostcleanup.wait_until(no_sandboxes, timeout=90, interval=0.5)


def _clean_host(state: NodeState) -> None:
    """Sweep what the node's processes leave behind: shims, mounts, iptables chains, bridges,
    sysctls and the fixed paths they created."""
    hostcleanup.kill_processes(hostcleanup.processes_mentioning(str(state.containerd_socket)))
    node_bin = provisioning.KUBERNETES_NODE.directory
    if (node_bin / "kube-proxy").exists():
        noderunning.cleanup_kube_proxy(
            node_bin / "kube-proxy", log=paths.state_dir() / "logs" / "kube-proxy.log"
        )
    created = [p for p in node.FIXED_PATHS if p not in state.preexisting_paths]
    hostcleanup.unmount_all([state.root, *created])
    hostcleanup.remove_chains()
    for link in (node.POD_BRIDGE, node.HOST_BRIDGE):
        hostcleanup.delete_link(link)
    hostcleanup.restore_sysctls(state.sysctls)
    hostcleanup.remove_paths(created)


def describe(state: StackState) -> list[tuple[str, int, bool]]:
    """(name, pid, alive) of each process of a stack."""
    return [(p.name, p.pid, processes.is_alive(p)) for p in state.processes]


def describe_node(state: StackState) -> list[str]:
    """The node's readiness and its pods, one line each (as `rillet dev status` prints them)."""
    assert state.node is not None
    core = _core(ControlPlaneLayout(state.kubeconfig.parent))
    found = core.read_node(state.node.name)
    ready = next((c.status for c in found.status.conditions or [] if c.type == "Ready"), "Unknown")
    lines = [f"node {state.node.name} {state.node.address} Ready={ready}"]
    serialized = core.api_client.sanitize_for_serialization(found)
    lines += [f"  takes no pods: {reason}" for reason in nodechecking.why_pods_wait(serialized)]
    pods = core.list_pod_for_all_namespaces().items
    for pod in pods:
        lines.append(f"  pod {pod.metadata.namespace}/{pod.metadata.name} {pod.status.phase}")
    listed = core.api_client.sanitize_for_serialization(pods)
    if unattended := nodechecking.unattended_pods(listed, now=datetime.now(UTC)):
        lines.append(f"  pods waiting over a minute for: {', '.join(unattended)}")
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
    return found
