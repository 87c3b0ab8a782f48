"""The stack's worker nodes as the multi-node tests use them: the `rillet` command that grows
the stack and stops and starts a node, the nodes' names, and where an App's pods run."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from rillet_devstack import extranodes
from rillet_devstack import stack as devstack

from .conftest import Kube
from .objects import condition
from .wordcounts import pods, running

RILLET = [sys.executable, "-m", "rillet.cli"]
NODE_1, NODE_2 = "rillet-node", "rillet-node-2"


def rillet(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """`rillet ARGS`, captured (wide: its tables are read)."""
    return subprocess.run(
        [*RILLET, *args],
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def grow_to_two() -> devstack.StackState:
    """The shared stack with (at least) two nodes, node 2 running: `rillet dev up --nodes 2`
    gives a stack of one its second node and reuses one of two as it is."""
    grown = rillet("dev", "up", "--nodes", "2")
    assert grown.returncode == 0, grown.stderr
    state = devstack.running()
    assert state is not None
    assert [n.name for n in state.extra_nodes if n.running][:1] == [NODE_2], state.extra_nodes
    return state


def containerd_socket(stack: devstack.StackState, node: str) -> Path:
    """The containerd of the node of this name: node 1's, or an extra node's (which the stack
    may have grown since `stack` was read)."""
    assert stack.node is not None
    if node == stack.node.name:
        return stack.node.containerd_socket
    index = extranodes.index_of(node)
    assert index is not None, f"no node {node} in the stack"
    return extranodes.layout_of(stack.kubeconfig.parent, index).containerd_socket


def stop(name: str) -> None:
    """Stop the node as a crash would (`rillet dev node stop`)."""
    stopped = rillet("dev", "node", "stop", name, timeout=60)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr


def start(name: str) -> None:
    """Start the node again with its state (`rillet dev node start`)."""
    started = rillet("dev", "node", "start", name, timeout=300)
    assert started.returncode == 0, started.stdout + started.stderr


@contextlib.contextmanager
def cordoned(kube: Kube, node: str) -> Iterator[None]:
    kube.kubectl("cordon", node)
    try:
        yield
    finally:
        kube.kubectl("uncordon", node)


@contextlib.contextmanager
def only_node_1(kube: Kube) -> Iterator[None]:
    """Every other node cordoned meanwhile (those the stack has): what is scheduled then, such as
    a driver whose volume then binds it there, lands on node 1."""
    others = [name for name in kube.names("nodes") if name != NODE_1]
    with contextlib.ExitStack() as cordons:
        for other in others:
            cordons.enter_context(cordoned(kube, other))
        yield


def node_ready(kube: Kube, node: str) -> bool:
    found = kube.api.read("node", node, None)
    return condition(found or {}, "Ready").get("status") == "True"


def executor_nodes(kube: Kube, namespace: str) -> Counter[str]:
    return Counter(p["spec"].get("nodeName") for p in running(kube, namespace, "executor"))


def live_executors(kube: Kube, namespace: str, *, left_out: str) -> int:
    """Executor pods running or asked for (Pending), not being deleted, on nodes but `left_out`
    (the lost node, whose pods Spark no longer counts on)."""
    return sum(
        1
        for p in pods(kube, namespace, "executor")
        if p["status"].get("phase") in ("Pending", "Running")
        and not p["metadata"].get("deletionTimestamp")
        and p["spec"].get("nodeName") != left_out
    )


def driver_node(kube: Kube, namespace: str) -> str | None:
    found = running(kube, namespace, "driver")
    return found[0]["spec"].get("nodeName") if found else None
