"""The stack's extra worker nodes (`rillet dev up --nodes N`): `rillet-node-2` and `rillet-node-3`
beside node 1, on the same machine, as `../shared/reference/NODES.md` records them working.

Node N (2 or 3) runs its own containerd, kubelet, kube-proxy and NetworkPolicy controller
(networkpolicies), in a network namespace of its
own (`rillet-nN`, a veth pair to the host on 10.99.N.0/30: host .1, node .2) and a mount namespace
of its own (`unshare --mount --propagation slave`), where node-private directories are bound over
the paths kubelet, containerd and CNI hardcode. Its pods get 10.244.(N-1).0/24, routed by the host
to the node's address, without masquerading: pod addresses hold end to end. Its kubelet keeps to
the cgroup root `/rillet-node-N`, where all of its processes live too, so that killing the node
is killing what that cgroup subtree holds. The netns is entered with `nsenter --net`, never
`ip netns exec`: that remounts /sys for the netns and hides the cgroup filesystem.

Everything here is pure: names, addresses, commands and the anchor script that starts the node's
daemons. Running them is extranoderunning's; the stack-level steps (images, readiness, state)
are nodegrowing's.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from rillet_devstack import networkpolicies, node

MAX_NODES = 3
# The paths kubelet, containerd and CNI hardcode ("one node per machine"), each bound over by a
# node-private directory in the node's mount namespace. The device-plugin directory
# (/var/lib/kubelet/device-plugins) above all: a kubelet empties it on start, node 1's socket
# with it.
PRIVATE_PATHS = (
    Path("/var/lib/kubelet"),
    Path("/var/log/containers"),
    Path("/run/containerd"),
    Path("/var/lib/cni"),
    Path("/run/netns"),
    Path("/etc/cni"),
)
# The daemons of a node, as their pid files and command lines name them.
DAEMONS = ("kubelet", "kube-proxy", "networkpolicies", "containerd")
# The controller's kubeconfig: a link in the node's config folder to the stack's, so that its
# command line names the node's directory (`names_the_daemon`).
NETWORK_POLICIES_KUBECONFIG = "networkpolicies.kubeconfig"
# Written once the node's containerd holds the stack's images: its kubelet waits for it, so no
# pod is admitted before its image is there.
IMAGES_READY = "images-ready"
# Written by `stop` before it ends the daemons: their keepers then let them go.
STOPPING = "stopping"


@dataclass(frozen=True)
class ExtraNode:
    """An extra node: its Kubernetes side (spec) and its network and cgroup on the host."""

    spec: node.NodeSpec
    netns: str
    host_link: str
    node_link: str
    host_address: str

    @property
    def cgroup_root(self) -> str:
        assert self.spec.cgroup_root is not None
        return self.spec.cgroup_root

    @property
    def netns_path(self) -> Path:
        return Path("/run/netns") / self.netns


def extra_node(index: int) -> ExtraNode:
    """Node `index` (2 or 3): its names, addresses, pod range and cgroup root."""
    if not 2 <= index <= MAX_NODES:
        raise ValueError(f"extra nodes are 2 to {MAX_NODES}, not {index}")
    return ExtraNode(
        spec=node.NodeSpec(
            index=index,
            name=f"{node.NODE_NAME}-{index}",
            address=f"10.99.{index}.2",
            pod_cidr=f"10.244.{index - 1}.0/24",
            pod_bridge=f"rn{index}-pods",
            cgroup_root=f"/rillet-node-{index}",
        ),
        netns=f"rillet-n{index}",
        host_link=f"rn{index}-host",
        node_link=f"rn{index}-eth0",
        host_address=f"10.99.{index}.1",
    )


def index_of(name: str) -> int | None:
    """The index of the extra node of this name, None if no extra node has it."""
    for index in range(2, MAX_NODES + 1):
        if extra_node(index).spec.name == name:
            return index
    return None


def layout_of(state_dir: Path, index: int) -> node.NodeLayout:
    """Where node `index` keeps its files: `node-N` beside node 1's `node`."""
    return node.NodeLayout(state_dir / f"node-{index}")


def private_dir(layout: node.NodeLayout, path: Path) -> Path:
    """The node's own directory bound over `path` in its mount namespace."""
    return layout.root / "private" / "-".join(path.parts[1:])


def network_commands(extra: ExtraNode) -> list[list[str]]:
    """The `ip` commands that give the node its network: the netns, the veth pair, addresses,
    its default route to the host, and the host's route to its pods."""
    ns, host, peer = extra.netns, extra.host_link, extra.node_link
    return [
        ["ip", "netns", "add", ns],
        ["ip", "link", "add", host, "type", "veth", "peer", "name", peer],
        ["ip", "link", "set", peer, "netns", ns],
        ["ip", "addr", "add", f"{extra.host_address}/30", "dev", host],
        ["ip", "link", "set", host, "up"],
        ["ip", "-n", ns, "link", "set", "lo", "up"],
        ["ip", "-n", ns, "addr", "add", f"{extra.spec.address}/30", "dev", peer],
        ["ip", "-n", ns, "link", "set", peer, "up"],
        ["ip", "-n", ns, "route", "add", "default", "via", extra.host_address],
        ["ip", "route", "add", extra.spec.pod_cidr, "via", extra.spec.address, "dev", host],
    ]


def enter_command(extra: ExtraNode, script: Path) -> list[str]:
    """Run `script` in the node's netns and a new mount namespace (the anchor process)."""
    return [
        "nsenter",
        f"--net={extra.netns_path}",
        "--",
        "unshare",
        "--mount",
        "--propagation",
        "slave",
        "--",
        "bash",
        str(script),
    ]


def pid_file(layout: node.NodeLayout, daemon: str) -> Path:
    return layout.root / f"{daemon}.pid"


def build_anchor_script(
    extra: ExtraNode,
    layout: node.NodeLayout,
    *,
    kube_bin: Path,
    network_policies_bin: Path,
    logs: Path,
) -> str:
    """The anchor: joins the node's cgroups, binds the private paths, starts containerd, waits
    for the images, then starts kubelet, kube-proxy and the NetworkPolicy controller (its
    packet steering set in the node's netns first), and stays while they run."""
    q = shlex.quote
    config = layout.config
    lines = ["set -e"]
    lines += [
        f"echo $$ > /sys/fs/cgroup/{c}{extra.cgroup_root}/system/cgroup.procs"
        for c in ("pids", "freezer")
    ]
    # A target node 1 has not made yet is made here, on the host: it is among the fixed paths
    # `down` removes when the stack made them (node.FIXED_PATHS).
    lines += [f"mkdir -p {p}" for p in PRIVATE_PATHS]
    lines += [f"mount --bind {q(str(private_dir(layout, p)))} {p}" for p in PRIVATE_PATHS]
    lines += _keeper(layout)
    containerd = f"containerd --config {q(str(layout.containerd / 'config.toml'))}"
    kubelet = (
        f"{q(str(kube_bin / 'kubelet'))} --config={q(str(config / 'kubelet.yaml'))}"
        f" --kubeconfig={q(str(config / 'kubelet.kubeconfig'))}"
        f" --root-dir={q(str(layout.kubelet))} --cert-dir={q(str(config / 'kubelet-pki'))}"
        f" --hostname-override={extra.spec.name} --node-ip={extra.spec.address} --v=1"
    )
    proxy = f"{q(str(kube_bin / 'kube-proxy'))} --config={q(str(config / 'kube-proxy.yaml'))} --v=1"
    policies = networkpolicies.command(
        network_policies_bin,
        kubeconfig=config / NETWORK_POLICIES_KUBECONFIG,
        node_name=extra.spec.name,
    )
    # The netns outlives a stopped node: steering left from its last start is removed first.
    lines += [f"{shlex.join(c)} 2>/dev/null || true" for c in networkpolicies.steering_removal()]
    lines += [shlex.join(c) for c in networkpolicies.steering_rules()]
    lines += [
        f"keep containerd {q(str(logs / 'containerd.log'))} {containerd} &",
        f"until [ -e {q(str(layout.root / IMAGES_READY))} ]; do sleep 0.2; done",
        f"keep kubelet {q(str(logs / 'kubelet.log'))} {kubelet} &",
        f"keep kube-proxy {q(str(logs / 'kube-proxy.log'))} {proxy} &",
        f"keep networkpolicies {q(str(logs / 'networkpolicies.log'))} {shlex.join(policies)} &",
        "wait",
    ]
    return "\n".join(lines) + "\n"


def _keeper(layout: node.NodeLayout) -> list[str]:
    """`keep NAME LOG COMMAND...`: runs a daemon, records its PID, and starts it again when it
    exits (logged), as systemd's Restart=always does for a node's kubelet; until `stop` marks the
    node STOPPING (a crash kills the keepers with their daemons)."""
    q = shlex.quote
    stopping = q(str(layout.root / STOPPING))
    return [
        "keep() {",
        "  name=$1 log=$2; shift 2",
        f"  while [ ! -e {stopping} ]; do",
        '    "$@" >> "$log" 2>&1 &',
        f'    echo $! > {q(str(layout.root))}/"$name".pid',
        "    code=0; wait $! || code=$?",
        f"    [ -e {stopping} ] && break",
        '    echo "rillet: $name exited ($code); started again in 1 s" >> "$log"',
        "    sleep 1",
        "  done",
        "}",
    ]


def names_the_daemon(cmdline: bytes, *, daemon: str, layout: node.NodeLayout) -> bool:
    """Whether a /proc/PID/cmdline is this node's `daemon` (a recorded PID may have been reused:
    it must name both the daemon and the node's directory)."""
    argv = cmdline.split(b"\0")
    return (
        bool(argv)
        and Path(argv[0].decode(errors="replace")).name == daemon
        and (str(layout.root).encode() in cmdline)
    )
