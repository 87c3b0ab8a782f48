"""Stopping the local stack: its processes in the reverse order of their start (the node's pods
and their networks first), then a sweep of what the node changed on the host.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from rillet_devstack import (
    controlplane,
    hostcleanup,
    node,
    nodegrowing,
    noderunning,
    objectstoring,
    paths,
    processes,
    provisioning,
    stack,
)
from rillet_devstack.controlplane import ControlPlaneLayout


def down() -> list[str]:
    """Stop every process of the recorded stack and undo what its node changed on the host;
    return the names of the processes that were running."""
    state = stack.load()
    if state is None:
        return []
    stopped = stop(state)
    stack.state_file().unlink(missing_ok=True)
    return stopped


def stop(state: stack.StackState) -> list[str]:
    """Stop the stack's processes and sweep the host; the names of those that were running."""
    stopped: list[str] = []
    by_name = {record.name: record for record in state.processes}
    left_behind: RuntimeError | None = None

    def stop(name: str) -> None:
        record = by_name.pop(name, None)
        if record and processes.is_alive(record):
            processes.stop(record)
            stopped.append(name)

    if state.node is not None:
        # No new pods may start while the running ones are taken down with their networks.
        stop("kube-scheduler")
        _delete_pods(state, ControlPlaneLayout(state.kubeconfig.parent))
        try:
            nodegrowing.remove_all(state)
        except RuntimeError as error:  # raised once node 1 and the rest are stopped too
            left_behind = error
        for name in ("kubelet", "kube-proxy", "coredns", "local-path-provisioner"):
            stop(name)
        containerd = by_name.get("containerd")
        if containerd is not None and processes.is_alive(containerd):
            noderunning.release_image_store(node.NodeLayout(state.node.root))
        stop("containerd")
    if store := by_name.pop(objectstoring.PROCESS_NAME, None):  # slow to exit: a grace of its own
        stopped += objectstoring.stop(store, state.object_store)
    # Reverse start order for the rest: Kafka first, etcd last.
    for record in reversed(state.processes):
        stop(record.name)
    if state.node is not None:
        _clean_host(state.node)
    if left_behind is not None:
        raise left_behind
    return stopped


def _delete_pods(state: stack.StackState, layout: ControlPlaneLayout) -> None:
    """Delete every pod and wait (bounded) until containerd runs none: kubelet tears down each
    sandbox with its CNI network, which nothing does once kubelet is gone."""
    assert state.node is not None
    sockets = [state.node.containerd_socket, *nodegrowing.running_sockets(state)]
    try:
        core = controlplane.core_api(layout)
        for pod in core.list_pod_for_all_namespaces().items:
            core.delete_namespaced_pod(
                pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
            )
    except Exception:  # an apiserver already gone: the sweep below still cleans the host
        return

    def no_sandboxes() -> bool:
        return all(_runs_no_task(socket) for socket in sockets)

    hostcleanup.wait_until(no_sandboxes, timeout=90, interval=0.5)


def _runs_no_task(socket: Path) -> bool:
    listed = subprocess.run(
        ["ctr", "-a", str(socket), "-n", "k8s.io", "tasks", "ls", "-q"],
        capture_output=True,
        text=True,
        check=False,
    )
    return listed.returncode != 0 or not listed.stdout.strip()


def _clean_host(state: stack.NodeState) -> None:
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
