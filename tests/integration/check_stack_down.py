"""`rillet dev down` leaves nothing of a stack with two nodes on the host.

It starts and stops a stack of its own, so it never runs inside `make test` (whose shared stack
it would stop under the other tests): `make test-stack-down` runs it, on a machine where no stack
is recorded (the target runs `rillet dev down` first). Its name keeps pytest from collecting it
otherwise; given as a path, pytest runs it.

Test plan:
- the host is read before `rillet dev up --nodes 2` and after `rillet dev down`: links
  (`ip -br link`), routes, named network namespaces, iptables and ip6tables rules (without
  counters), mounts, the nodes' cgroup directories (/sys/fs/cgroup/*/rillet-node-*) and the
  fixed paths kubelet, containerd and CNI use. Between the two, the stack ran a pod on each node
  (so sandboxes, CNI networks and pod mounts existed, and the reads taken meanwhile differ).
  After `down` every read equals the one before, and tests/hostsnapshot.py (processes, sysctls
  and the rest) finds nothing left behind.
"""

from __future__ import annotations

import glob
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rillet_devstack import node, tools
from rillet_devstack import stack as devstack
from tests import hostparsing, hostsnapshot

from .polling import wait_for

RILLET = [sys.executable, "-m", "rillet.cli"]
# Image builds (this machine's other sessions', too) mount their layers here while they run:
# not the stack's (tests/hostsnapshot.py still sees them, and waits for them to go).
BUILDAH_STORE = "/var/lib/containers/storage/"


def _lines(*command: str) -> list[str]:
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.splitlines()


def read_host() -> dict[str, list[str]]:
    """What the stack's nodes change on the host, as the host's own tools show it."""
    return {
        "links": sorted(" ".join(line.split()[:2]) for line in _lines("ip", "-br", "link")),
        "routes": _lines("ip", "route"),
        "netns": _lines("ip", "netns", "list"),
        "rules": list(hostsnapshot.read_rules()),
        "mounts": sorted(
            mount
            for mount in hostparsing.parse_mountinfo(Path("/proc/self/mountinfo").read_text())
            if not mount.startswith(BUILDAH_STORE)
        ),
        "cgroups": sorted(glob.glob("/sys/fs/cgroup/*/rillet-node*")),
        "fixed paths": [str(path) for path in node.FIXED_PATHS if path.exists()],
    }


def _rillet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RILLET, *args], capture_output=True, text=True, timeout=1800, check=False
    )


def _run_a_pod_on_each_node(state: devstack.StackState) -> None:
    names = {"rillet-node": "on-one", "rillet-node-2": "on-two"}
    for node_name, pod in names.items():
        manifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod, "namespace": "default"},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node_name},
                "containers": [
                    {
                        "name": "main",
                        "image": "rillet/spark-runtime:0.1.0",
                        "command": ["sleep", "600"],
                    }
                ],
            },
        }
        applied = tools.run_kubectl(
            state.kubeconfig, ["apply", "-f", "-"], input=json.dumps(manifest)
        )
        assert applied.returncode == 0, applied.stderr

    def running() -> bool:
        listed = tools.run_kubectl(state.kubeconfig, ["get", "pods", "-n", "default", "-o", "json"])
        pods = json.loads(listed.stdout)["items"] if listed.returncode == 0 else []
        return sorted(p["status"].get("phase") for p in pods) == ["Running", "Running"]

    wait_for(running, timeout=120, interval=1, what="a pod running on each node")


def test_down_leaves_nothing_of_a_stack_with_two_nodes() -> None:
    if devstack.load() is not None:
        pytest.fail("a stack is recorded: `rillet dev down` first (this test starts its own)")
    before, snapshot = read_host(), hostsnapshot.take()

    up = _rillet("dev", "up", "--nodes", "2")
    assert up.returncode == 0, up.stderr
    state = devstack.running()
    assert state is not None
    _run_a_pod_on_each_node(state)
    during = read_host()
    down = _rillet("dev", "down")
    after = read_host()
    left = hostsnapshot.left_behind_since(snapshot, hostsnapshot.StackScope.of(state))

    assert down.returncode == 0, down.stderr
    assert "rillet-n2" in " ".join(during["netns"])
    assert any("rillet-node-2" in path for path in during["cgroups"])
    changed = {key: (before[key], after[key]) for key in before if before[key] != after[key]}
    assert not changed, f"`rillet dev down` left the host changed: {changed}"
    assert not left, f"`rillet dev down` left behind: {left}"
