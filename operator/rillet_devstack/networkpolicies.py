"""NetworkPolicy enforcement on the stack's nodes: SIG Network's kube-network-policies.

The bridge CNI enforces no NetworkPolicy, so without this the per-App and per-Table policies
Rillet makes would be words only. kube-network-policies (sigs.k8s.io, the implementation kind's
default network embeds) is built from its Go module (pinned in `networkpolicies/go.mod`) behind a
small wrapper (`networkpolicies/main.go`) that reads a kubeconfig, since the stack runs node
parts as host processes and upstream's command only runs in a pod. Each node runs one, for its
own pods: node 1 on the host, extra nodes in their network namespace (extranodes).

Upstream steers the first packet of each connection to its nfqueue with nftables' `queue`
expression, which this machine's kernel lacks (`nft add rule ... queue num 100`: "No such file
or directory"); its own rules are then refused as a whole and it still answers the queue. The
stack steers instead with iptables' NFQUEUE target, which the kernel has: every new connection
a pod opens that is forwarded (pod to pod, across the bridge or between nodes) goes to the
queue, and the controller decides by the policies. `--queue-bypass` lets traffic through while
the controller is not listening (upstream's `--fail-open`), so a restart never cuts the stack
off; the tests that a policy holds fail loudly then. Traffic the host opens (kubelet probes,
the apiserver's proxy, the tests and the operator run on the host) is never queued, to node 1's
pods or to an extra node's: all the stack's nodes share the host, and upstream accepts a
node's own traffic.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from rillet_devstack import gobuilding, node, processes, reporting
from rillet_devstack.commands import run_logged

SOURCE = Path(__file__).resolve().parent / "networkpolicies"
SOURCES = ("main.go", "go.mod", "go.sum")
BINARY = "networkpolicies"
# As upstream's default.
QUEUE = 100
CHAIN = "RILLET-NETWORK-POLICIES"
# mangle's FORWARD runs before filter's: a packet the controller accepts goes on to kube-proxy's
# filter rules (an accepted NFQUEUE verdict skips the rest of the table that queued it).
TABLE = "mangle"


def version() -> str:
    """The cache version: upstream's release and a hash of the wrapper's sources."""
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(name.encode() + b"\0" + (SOURCE / name).read_bytes())
    return f"0.8.0-{digest.hexdigest()[:12]}"


def build(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """Compile the wrapper with the versions its go.sum pins (no module is upgraded)."""
    module = scratch / "networkpolicies"
    module.mkdir(parents=True, exist_ok=True)
    for name in SOURCES:
        shutil.copy2(SOURCE / name, module / name)
    progress("building kube-network-policies")
    env = {**gobuilding.GO_ENV, "GOFLAGS": "-mod=readonly"}
    run_logged(
        ["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", target / BINARY, "."],
        cwd=module,
        log=target / "build.log",
        env=env,
    )


def steering_rules(iptables: str = "iptables") -> list[list[str]]:
    """The iptables commands that queue each new forwarded connection for the controller.
    Idempotent when run after `steering_removal` (the stack removes them first)."""
    return [
        [iptables, "-w", "5", "-t", TABLE, "-N", CHAIN],
        [
            *(iptables, "-w", "5", "-t", TABLE, "-A", CHAIN),
            *("-s", node.CLUSTER_CIDR, "-m", "conntrack", "--ctstate", "NEW"),
            *("-j", "NFQUEUE", "--queue-num", str(QUEUE), "--queue-bypass"),
        ],
        [iptables, "-w", "5", "-t", TABLE, "-I", "FORWARD", "1", "-j", CHAIN],
    ]


def steering_removal(iptables: str = "iptables") -> list[list[str]]:
    """The commands that take the steering away (each may fail: nothing to remove)."""
    return [
        [iptables, "-w", "5", "-t", TABLE, "-D", "FORWARD", "-j", CHAIN],
        [iptables, "-w", "5", "-t", TABLE, "-F", CHAIN],
        [iptables, "-w", "5", "-t", TABLE, "-X", CHAIN],
    ]


def command(binary: Path, *, kubeconfig: Path, node_name: str) -> list[str]:
    """The controller's command line for one node."""
    return [
        str(binary),
        f"-kubeconfig={kubeconfig}",
        f"-hostname-override={node_name}",
        f"-nfqueue-id={QUEUE}",
    ]


def start(binary: Path, *, kubeconfig: Path, node_name: str, log: Path) -> processes.ProcessRecord:
    """Node 1's controller, on the host, with the host's steering (removed by `down` with the
    node's other chains: hostcleanup)."""
    for removal in steering_removal():
        subprocess.run(removal, capture_output=True, check=False)
    for rule in steering_rules():
        run_logged(rule, log=log)
    return processes.start(
        "networkpolicies", command(binary, kubeconfig=kubeconfig, node_name=node_name), log=log
    )
