"""Growing the stack by extra nodes (extranodes) and taking them away: `rillet dev up --nodes N`
adds the missing ones (and starts stopped ones) to a running stack, each with node 1's images and
Ready before it returns; `rillet dev node stop/start` stops one as a crash would and starts it
again with the same state; `rillet dev down` takes them off the host (stopping's first step
after the pods are gone).

Each node is recorded in the stack's state as soon as its anchor runs, so a failed start is
undone by `down`. An extra node's processes are not among the stack's `processes`: a stopped
node leaves the stack running. One command at a time starts or stops nodes (a file lock), on the
record as the one before it left it.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

from rillet_devstack import (
    controlplane,
    extranoderunning,
    extranodes,
    importing,
    networkpolicies,
    node,
    noderunning,
    paths,
    processes,
    provisioning,
    reporting,
    stack,
)
from rillet_devstack.controlplane import ControlPlaneLayout

READY_TIMEOUT = 90


class UnknownNodeError(ValueError):
    """No extra node of this name is in the stack, or it is node 1 (which is not stopped alone)."""


def _recorded(state: stack.StackState, index: int) -> stack.ExtraNodeState | None:
    return next((n for n in state.extra_nodes if n.index == index), None)


def _layout(state: stack.StackState, index: int) -> node.NodeLayout:
    return extranodes.layout_of(state.kubeconfig.parent, index)


@contextlib.contextmanager
def _one_at_a_time(state: stack.StackState) -> Iterator[None]:
    """Held while extra nodes start or stop: two `rillet` commands (one test's `dev node stop`,
    another's `dev up --nodes 2`) never act on the nodes at once, and each acts on the nodes'
    record as the other left it, not on its own older copy (which could take a node stopped
    meanwhile for running, or one started meanwhile for stopped, and start it twice)."""
    lock = paths.state_dir().with_name(f"{paths.state_dir().name}.nodes.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        recorded = stack.load()
        if recorded is not None and recorded.processes == state.processes:
            state.extra_nodes = recorded.extra_nodes
        yield


def ensure(
    state: stack.StackState, *, count: int, report: reporting.Reporter = reporting.silent
) -> stack.StackState:
    """Nodes 2 to `count` running, with node 1's images, and Ready; none is removed."""
    with _one_at_a_time(state):
        _ensure(state, count=count, report=report)
    return state


def _ensure(state: stack.StackState, *, count: int, report: reporting.Reporter) -> None:
    started = []
    for index in range(2, count + 1):
        recorded = _recorded(state, index)
        if recorded is None or not recorded.running:
            with report(f"{extranodes.extra_node(index).spec.name}: network, cgroups, containerd"):
                _start(state, index)
            started.append(index)
    if started:
        _sync_images(state, report=report)
        for index in started:
            _wait_ready(state, index, report=report)


def _start(state: stack.StackState, index: int) -> None:
    """Start node `index` as far as its containerd (its kubelet waits for the images)."""
    extra = extranodes.extra_node(index)
    layout = _layout(state, index)
    recorded = _recorded(state, index)
    if recorded is None:
        recorded = stack.ExtraNodeState(
            index=index, name=extra.spec.name, address=extra.spec.address, root=layout.root
        )
        state.extra_nodes.append(recorded)
    # Recorded before anything runs: an interrupted start is undone by `down`.
    recorded.stopped = False
    stack.save(state)
    script = extranoderunning.prepare(
        extra,
        layout,
        control=ControlPlaneLayout(state.kubeconfig.parent),
        server=state.apiserver,
        kube_bin=provisioning.KUBERNETES_NODE.directory,
        network_policies_bin=provisioning.NETWORK_POLICIES.directory / networkpolicies.BINARY,
    )
    extranoderunning.create_network(extra)
    extranoderunning.create_cgroups(extra)
    recorded.anchor = extranoderunning.start(extra, layout, script=script, images_ready=False)
    stack.save(state)


def _wait_ready(state: stack.StackState, index: int, *, report: reporting.Reporter) -> None:
    extra = extranodes.extra_node(index)
    recorded = _recorded(state, index)
    assert recorded is not None
    assert recorded.anchor is not None
    extranoderunning.mark_images_ready(_layout(state, index))
    layout = ControlPlaneLayout(state.kubeconfig.parent)

    def ready() -> bool:
        return controlplane.node_schedulable(layout, extra.spec.name)

    with report(f"{extra.spec.name} Ready"):
        processes.wait_ready(
            recorded.anchor, ready, timeout=READY_TIMEOUT, what=f"{extra.spec.name} Ready"
        )


def running_sockets(state: stack.StackState) -> list[Path]:
    """The containerd sockets of the running extra nodes."""
    return [_layout(state, n.index).containerd_socket for n in state.extra_nodes if n.running]


def sync_images(state: stack.StackState, *, report: reporting.Reporter = reporting.silent) -> None:
    """Every running extra node holds node 1's images, under the same names."""
    with _one_at_a_time(state):
        _sync_images(state, report=report)


def _sync_images(state: stack.StackState, *, report: reporting.Reporter) -> None:
    targets = running_sockets(state)
    if state.node is not None and targets:
        importing.copy_images(source=state.node.containerd_socket, targets=targets, report=report)


def index_to_stop(state: stack.StackState, name: str) -> int:
    """The index of the recorded extra node `name`; refused for node 1 and unknown names."""
    if state.node is not None and name == state.node.name:
        raise UnknownNodeError(
            f"{name} is node 1: the stack's scheduler, cluster DNS and storage run beside its "
            "kubelet, so it is not stopped alone (`rillet dev down` stops the whole stack); "
            "stop an extra node instead (`rillet dev up --nodes 2` adds rillet-node-2)"
        )
    index = extranodes.index_of(name)
    if index is None or _recorded(state, index) is None:
        known = ", ".join(n.name for n in state.extra_nodes) or "none"
        raise UnknownNodeError(f"no extra node {name} in the stack (extra nodes: {known})")
    return index


def stop(state: stack.StackState, name: str) -> list[int]:
    """Stop an extra node as a crash would (everything in its cgroup SIGKILLed at once, nothing
    told); recorded as stopped. The PIDs killed."""
    with _one_at_a_time(state):
        index = index_to_stop(state, name)
        recorded = _recorded(state, index)
        assert recorded is not None
        killed = extranoderunning.crash(extranodes.extra_node(index))
        recorded.stopped = True
        stack.save(state)
    return killed


def start(
    state: stack.StackState, name: str, *, report: reporting.Reporter = reporting.silent
) -> None:
    """Start a stopped extra node again, with the state it had; returns once it is Ready."""
    with _one_at_a_time(state):
        index = index_to_stop(state, name)
        recorded = _recorded(state, index)
        assert recorded is not None
        if recorded.running:
            return
        with report(f"{name}: containerd"):
            _start(state, index)
        _sync_images(state, report=report)
        _wait_ready(state, index, report=report)


def remove_all(state: stack.StackState) -> None:
    """Take every extra node off the host (its pods deleted already, so CNI DEL ran): daemons
    stopped, Node object deleted, then netns, cgroups and files."""
    with _one_at_a_time(state):
        _remove_all(state)


def _remove_all(state: stack.StackState) -> None:
    core = controlplane.core_api(ControlPlaneLayout(state.kubeconfig.parent))
    failures = []
    for recorded in list(state.extra_nodes):
        extra = extranodes.extra_node(recorded.index)
        layout = _layout(state, recorded.index)
        if recorded.running:  # its pods are deleted: its containerd then holds images only
            noderunning.release_image_store(layout)
        try:
            extranoderunning.stop(extra, layout)
        except RuntimeError as error:  # a process that outlives SIGKILL: the rest still goes
            failures.append(f"{extra.spec.name}: {error}")
        try:
            if core is not None:
                core.delete_node(extra.spec.name, _request_timeout=10)
        except Exception:  # already gone, or the apiserver is
            pass
        extranoderunning.remove(extra, layout)
        state.extra_nodes.remove(recorded)
    if failures:
        raise RuntimeError("; ".join(failures))
