"""Running an extra node (extranodes) on the host: its files, certificates and configs, its
network and cgroups; starting it (its anchor process), stopping it (gracefully, or as a crash
would: frozen and SIGKILLed by cgroup), and taking it off the host without a trace.

Processes are found by cgroup membership (the node's subtree) or by recorded PID checked against
/proc/PID/cmdline, never by name: other sessions on this machine run processes named alike.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import yaml

from rillet_devstack import extranodes, hostcleanup, node, noderunning, processes, versions
from rillet_devstack import pki as pki_module
from rillet_devstack.controlplane import ControlPlaneLayout
from rillet_devstack.extranodes import ExtraNode
from rillet_devstack.processes import ProcessRecord

CGROUPS = Path("/sys/fs/cgroup")


def prepare(
    extra: ExtraNode,
    layout: node.NodeLayout,
    *,
    control: ControlPlaneLayout,
    server: str,
    kube_bin: Path,
    network_policies_bin: Path,
) -> Path:
    """Write the node's directories, certificates and configs; the anchor script's path."""
    for path in extranodes.PRIVATE_PATHS:
        extranodes.private_dir(layout, path).mkdir(parents=True, exist_ok=True)
    for directory in (layout.containerd, layout.cni_config, layout.cni_ipam, layout.kubelet):
        directory.mkdir(parents=True, exist_ok=True)
    for directory in (layout.pod_logs, layout.config, logs_of(layout)):
        directory.mkdir(parents=True, exist_ok=True)
    (layout.cni_config / "10-rillet.conflist").write_text(
        json.dumps(node.build_cni_config(layout, spec=extra.spec))
    )
    (layout.containerd / "config.toml").write_text(
        node.build_containerd_config(layout, sandbox_image=versions.PAUSE_IMAGE)
    )
    certs = pki_module.ControlPlanePki(control.pki)
    serving = noderunning.issue_serving(control, spec=extra.spec)
    noderunning.write_node_kubeconfig(control, layout, server=server, spec=extra.spec)
    kubelet = node.build_kubelet_config(
        layout, ca_cert=certs.ca_cert, serving=serving, spec=extra.spec
    )
    (layout.config / "kubelet.yaml").write_text(yaml.safe_dump(kubelet))
    proxy = node.build_kube_proxy_config(control.kubeconfig, spec=extra.spec)
    (layout.config / "kube-proxy.yaml").write_text(yaml.safe_dump(proxy))
    link = layout.config / extranodes.NETWORK_POLICIES_KUBECONFIG
    link.unlink(missing_ok=True)
    link.symlink_to(control.kubeconfig)
    script = layout.root / "anchor.sh"
    script.write_text(
        extranodes.build_anchor_script(
            extra,
            layout,
            kube_bin=kube_bin,
            network_policies_bin=network_policies_bin,
            logs=logs_of(layout),
        )
    )
    return script


def logs_of(layout: node.NodeLayout) -> Path:
    return layout.root / "logs"


def create_network(extra: ExtraNode) -> None:
    """The node's netns, veth pair and routes (kept while the node is stopped)."""
    if extra.netns_path.exists():
        return
    for command in extranodes.network_commands(extra):
        subprocess.run(command, check=True, capture_output=True)
    # Per netns: the node forwards between its pods' bridge and its veth.
    subprocess.run(
        ["nsenter", f"--net={extra.netns_path}", "sysctl", "-qw", "net.ipv4.ip_forward=1"],
        check=True,
        capture_output=True,
    )


def hierarchies() -> list[Path]:
    """The mounted cgroup v1 hierarchies (and the unified one), each once."""
    found: dict[Path, Path] = {}
    for entry in sorted(CGROUPS.iterdir()):
        if (entry / "cgroup.procs").exists():
            found.setdefault(entry.resolve(), entry)
    return list(found.values())


def create_cgroups(extra: ExtraNode) -> None:
    """`<root>/system` in every hierarchy, cpuset's CPUs and memory nodes copied (an empty
    cpuset takes no process); kubelet refuses a cgroupRoot that does not exist."""
    for hierarchy in hierarchies():
        (hierarchy / extra.cgroup_root.lstrip("/") / "system").mkdir(parents=True, exist_ok=True)
    cpuset = CGROUPS / "cpuset"
    if not (cpuset / "cpuset.cpus").exists():
        return
    root = cpuset / extra.cgroup_root.lstrip("/")
    for directory in (root, root / "system"):
        for name in ("cpuset.cpus", "cpuset.mems"):
            if not (directory / name).read_text().strip():
                (directory / name).write_text((cpuset / name).read_text())


def start(
    extra: ExtraNode, layout: node.NodeLayout, *, script: Path, images_ready: bool
) -> ProcessRecord:
    """Start the node's anchor; returns once its containerd answers (kubelet starts once the
    images are in: `mark_images_ready`)."""
    if not images_ready:
        (layout.root / extranodes.IMAGES_READY).unlink(missing_ok=True)
    (layout.root / extranodes.STOPPING).unlink(missing_ok=True)
    noderunning.claim_image_store(layout)
    anchor = processes.start(
        f"{extra.spec.name} anchor",
        extranodes.enter_command(extra, script),
        log=logs_of(layout) / "anchor.log",
    )

    processes.wait_ready(
        anchor,
        lambda: noderunning.containerd_answers(layout),
        timeout=60,
        what="containerd serving",
    )
    return anchor


def mark_images_ready(layout: node.NodeLayout) -> None:
    (layout.root / extranodes.IMAGES_READY).touch()


def _subtree(hierarchy: str, extra: ExtraNode) -> Path:
    return CGROUPS / hierarchy / extra.cgroup_root.lstrip("/")


def cgroup_pids(extra: ExtraNode) -> list[int]:
    """Every process in the node's pids cgroup subtree: its daemons, shims and containers."""
    pids: set[int] = set()
    for directory, _, files in os.walk(_subtree("pids", extra)):
        if "cgroup.procs" in files:
            with contextlib.suppress(OSError):
                text = (Path(directory) / "cgroup.procs").read_text()
                pids.update(int(p) for p in text.split())
    return sorted(pids)


def _kill_subtree(extra: ExtraNode) -> list[int]:
    """Freeze the subtree (nothing forks or exits meanwhile), SIGKILL all in it, thaw; wait
    until it is empty. The PIDs killed."""
    freezer = _subtree("freezer", extra) / "freezer.state"
    if freezer.exists():
        freezer.write_text("FROZEN")
        hostcleanup.wait_until(lambda: freezer.read_text().strip() == "FROZEN", timeout=10)
    killed = cgroup_pids(extra)
    hostcleanup.kill_processes(killed)
    if freezer.exists():
        freezer.write_text("THAWED")
    if not hostcleanup.wait_until(lambda: not cgroup_pids(extra), timeout=30, interval=0.1):
        raise RuntimeError(f"{extra.spec.name}: still running after SIGKILL: {cgroup_pids(extra)}")
    return killed


def crash(extra: ExtraNode) -> list[int]:
    """Stop the node as a crash would: every process SIGKILLed at once, nothing told."""
    return _kill_subtree(extra)


def stop(extra: ExtraNode, layout: node.NodeLayout) -> None:
    """SIGTERM the node's daemons by their recorded PIDs (kubelet first; marked STOPPING, so
    their keepers let them go), then kill whatever is left in its cgroup (shims, the anchor)."""
    (layout.root / extranodes.STOPPING).touch()
    for daemon in extranodes.DAEMONS:
        try:
            pid = int(extranodes.pid_file(layout, daemon).read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if not extranodes.names_the_daemon(cmdline, daemon=daemon, layout=layout):
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        _wait_gone(pid)
    if cgroup_pids(extra):
        _kill_subtree(extra)


def _wait_gone(pid: int) -> None:
    hostcleanup.wait_until(lambda: not Path(f"/proc/{pid}").exists(), timeout=15)


def remove(extra: ExtraNode, layout: node.NodeLayout) -> None:
    """Take the stopped node off the host: its netns (with the veth pair, its bridge, routes and
    iptables), cgroups (depth first) and files, but a released image store (as node 1's)."""
    subprocess.run(["ip", "netns", "del", extra.netns], capture_output=True, check=False)
    hostcleanup.delete_link(extra.host_link)  # normally gone with its peer
    subprocess.run(["ip", "route", "del", extra.spec.pod_cidr], capture_output=True, check=False)
    for hierarchy in hierarchies():
        root = hierarchy / extra.cgroup_root.lstrip("/")
        for directory, _, _ in os.walk(root, topdown=False):
            with contextlib.suppress(OSError):
                Path(directory).rmdir()
    noderunning.remove_but_the_image_store(layout, logs=logs_of(layout))


def leftovers(extra: ExtraNode) -> list[str]:
    """What of the node is still on the host (empty once `remove` ran)."""
    found = [f"process {pid} of {extra.spec.name}" for pid in cgroup_pids(extra)]
    if extra.netns_path.exists():
        found.append(f"netns {extra.netns}")
    if noderunning.link_exists(extra.host_link):
        found.append(f"link {extra.host_link}")
    found += [
        f"cgroup {hierarchy / extra.cgroup_root.lstrip('/')}"
        for hierarchy in hierarchies()
        if (hierarchy / extra.cgroup_root.lstrip("/")).exists()
    ]
    return found
