"""The stack's worker nodes as the multi-node tests use them: the `rillet` command that grows
the stack and stops and starts a node, and the nodes' names."""

from __future__ import annotations

import os
import subprocess
import sys

from rillet_devstack import stack as devstack

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


def stop(name: str) -> None:
    """Stop the node as a crash would (`rillet dev node stop`)."""
    stopped = rillet("dev", "node", "stop", name, timeout=60)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr


def start(name: str) -> None:
    """Start the node again with its state (`rillet dev node start`)."""
    started = rillet("dev", "node", "start", name, timeout=300)
    assert started.returncode == 0, started.stdout + started.stderr
