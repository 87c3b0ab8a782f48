"""Running the worker node's components as host processes: the host bridge pods reach the stack
on, containerd (and releasing its image store), kubelet, kube-scheduler, kube-proxy, CoreDNS and
the local-path provisioner. Each `start_*` starts one component and returns once it serves;
the kernel settings and fixed paths the node changes are read first, for `rillet dev down`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import yaml

from rillet_devstack import node, processes
from rillet_devstack import pki as pki_module
from rillet_devstack.controlplane import ControlPlaneLayout, build_kubeconfig
from rillet_devstack.processes import ProcessRecord


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def link_exists(name: str) -> bool:
    """True when a network link of this name exists."""
    return Path(f"/sys/class/net/{name}").exists()


def create_host_bridge() -> None:
    """The node address on an empty bridge: pods route to it, and host processes reach it too."""
    if not link_exists(node.HOST_BRIDGE):
        _ip("link", "add", node.HOST_BRIDGE, "type", "bridge")
    existing = subprocess.run(
        ["ip", "-o", "addr", "show", "dev", node.HOST_BRIDGE], capture_output=True, text=True
    ).stdout
    if f" {node.NODE_ADDRESS}/" not in existing:
        _ip("addr", "add", f"{node.NODE_ADDRESS}/32", "dev", node.HOST_BRIDGE)
    _ip("link", "set", node.HOST_BRIDGE, "up")


def read_sysctls() -> dict[str, str]:
    """The current values of the settings the node may change (those this kernel has)."""
    values = {}
    for name in node.SYSCTLS:
        path = Path("/proc/sys") / name.replace(".", "/")
        if path.exists():
            values[name] = path.read_text().strip()
    return values


def existing_fixed_paths() -> list[Path]:
    """The fixed paths that exist before the node starts (and so are not the node's to remove)."""
    return [path for path in node.FIXED_PATHS if path.exists()]


def mount_netns_dir() -> None:
    """Make /run/netns a mount of its own, as `ip netns add` does on its first use (a shared
    bind of itself), before node 1's pods pin their network namespaces in it. Made later, by an
    extra node's `ip netns add`, it covered the pins of node 1's pods running then: containerd
    could no longer remove them (unlinkat: EBUSY), and those pods were never deleted. `down`
    unmounts it with the other fixed paths the stack made."""
    NETNS_DIR.mkdir(parents=True, exist_ok=True)
    if not os.path.ismount(NETNS_DIR):
        subprocess.run(["mount", "--bind", NETNS_DIR, NETNS_DIR], check=True)
    subprocess.run(["mount", "--make-shared", NETNS_DIR], check=True)


def start_containerd(layout: node.NodeLayout, *, sandbox_image: str, logs: Path) -> ProcessRecord:
    """containerd with the node's config; returns once its socket answers."""
    mount_netns_dir()
    layout.containerd.mkdir(parents=True, exist_ok=True)
    claim_image_store(layout)
    layout.cni_config.mkdir(parents=True, exist_ok=True)
    (layout.cni_config / "10-rillet.conflist").write_text(json.dumps(node.build_cni_config(layout)))
    config = layout.containerd / "config.toml"
    config.write_text(node.build_containerd_config(layout, sandbox_image=sandbox_image))
    record = processes.start(
        "containerd", ["containerd", "--config", config], log=logs / "containerd.log"
    )

    processes.wait_ready(record, lambda: containerd_answers(layout), timeout=60, what="serving")
    return record


def containerd_answers(layout: node.NodeLayout) -> bool:
    """Whether the node's containerd serves on its socket."""
    version = ["ctr", "-a", str(layout.containerd_socket), "version"]
    return subprocess.run(version, capture_output=True, timeout=10).returncode == 0


# Where `ip netns` and CNI pin network namespaces (node 1's pods', and the extra nodes').
NETNS_DIR = Path("/run/netns")
# What CRI keeps of each sandbox (hosts files, ...) inside containerd's root.
CRI_FILES = "io.containerd.grpc.v1.cri"


def release_image_store(layout: node.NodeLayout) -> bool:
    """Remove every container of the node's containerd (their pods are gone, their tasks
    ended), so that its root holds images only, and mark it reusable; False, unmarked, if a
    container could not be removed (the next `up` then starts from an empty root)."""
    base = ["ctr", "-a", str(layout.containerd_socket), "-n", "k8s.io", "containers"]
    try:  # never in the way of the teardown that follows
        listed = subprocess.run([*base, "ls", "-q"], capture_output=True, text=True, timeout=60)
        if listed.returncode != 0:
            return False
        ids = listed.stdout.split()
        # Removing a container removes its snapshot too; a running one is refused.
        if ids and subprocess.run([*base, "rm", *ids], capture_output=True, timeout=120).returncode:
            return False
    except (subprocess.TimeoutExpired, OSError):
        return False
    layout.image_store_released.touch()
    return True


def empty_state_dir(root: Path) -> None:
    """Remove everything of the last stack under `root` (every `up` starts an empty cluster),
    but each node's image store that the last `down` released (node 1's, and the extra nodes'
    in `node-N`): importing the images into a containerd again takes a minute or more. The
    files CRI kept for the last run's sandboxes go with the rest. Each kept store stays marked
    released until its containerd starts (`claim_image_store`): an extra node that this stack
    never starts keeps its images through any number of one-node stacks."""
    kept = {}
    for layout in (node.NodeLayout(path) for path in sorted(root.glob("node*"))):
        if _released(layout):
            aside = root.with_name(f"{root.name}.image-store-{layout.root.name}")  # a rename
            shutil.rmtree(aside, ignore_errors=True)
            layout.containerd_root.rename(aside)
            kept[layout] = aside
    shutil.rmtree(root, ignore_errors=True)
    for layout, aside in kept.items():
        layout.containerd.mkdir(parents=True)
        aside.rename(layout.containerd_root)
        shutil.rmtree(layout.containerd_root / CRI_FILES, ignore_errors=True)
        layout.image_store_released.touch()


def claim_image_store(layout: node.NodeLayout) -> None:
    """Unmark the node's image store as its containerd starts: from then on it holds the
    containers of a running node, until a clean `down` releases it again."""
    layout.image_store_released.unlink(missing_ok=True)


def remove_but_the_image_store(layout: node.NodeLayout, *, logs: Path | None = None) -> None:
    """Remove a node's files, but its image store when `release_image_store` marked it (the
    next `up` finds it, as `empty_state_dir` leaves it), and its `logs` directory: what went
    wrong in a run is read after its `down`, as node 1's logs are (the next `up` empties both)."""
    keep = {logs} if logs is not None and logs.is_dir() else set()
    if _released(layout):
        keep |= {layout.containerd, layout.containerd_root, layout.image_store_released}
    if not keep:
        shutil.rmtree(layout.root, ignore_errors=True)
        return
    inside = list(layout.containerd.iterdir()) if layout.containerd in keep else []
    for path in [*layout.root.iterdir(), *inside]:
        if path in keep:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    shutil.rmtree(layout.containerd_root / CRI_FILES, ignore_errors=True)


def _released(layout: node.NodeLayout) -> bool:
    return layout.image_store_released.exists() and layout.containerd_root.is_dir()


def _cert_name(spec: node.NodeSpec, kind: str) -> str:
    # Node 1's keep their names; an extra node's carry its own.
    return kind if spec == node.FIRST else f"{spec.name}-{kind}"


def issue_serving(
    control: ControlPlaneLayout, *, spec: node.NodeSpec = node.FIRST
) -> pki_module.IssuedCertificate:
    """The kubelet's serving certificate, for its name and address (the apiserver reaches it)."""
    return pki_module.issue(
        pki_module.ControlPlanePki(control.pki),
        name=_cert_name(spec, "kubelet-serving"),
        common_name=spec.name,
        ips=(spec.address,),
        dns_names=(spec.name,),
    )


def write_node_kubeconfig(
    control: ControlPlaneLayout,
    layout: node.NodeLayout,
    *,
    server: str,
    spec: node.NodeSpec = node.FIRST,
) -> Path:
    """The kubelet's credentials: a client certificate in system:nodes, as NodeRestriction wants."""
    certs = pki_module.ControlPlanePki(control.pki)
    client = pki_module.issue(
        certs,
        name=_cert_name(spec, "kubelet-client"),
        common_name=f"system:node:{spec.name}",
        organizations=("system:nodes",),
    )
    path = layout.config / "kubelet.kubeconfig"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        build_kubeconfig(
            server=server,
            ca_pem=certs.ca_cert.read_bytes(),
            user=f"system:node:{spec.name}",
            client_cert=client.cert,
            client_key=client.key,
        )
    )
    path.chmod(0o600)
    return path


def start_kubelet(
    binary: Path, control: ControlPlaneLayout, layout: node.NodeLayout, *, server: str
) -> ProcessRecord:
    """kubelet registering NODE_NAME on NODE_ADDRESS; returns once the apiserver has the node."""
    certs = pki_module.ControlPlanePki(control.pki)
    serving = issue_serving(control)
    kubeconfig = write_node_kubeconfig(control, layout, server=server)
    config = layout.config / "kubelet.yaml"
    config.write_text(
        yaml.safe_dump(node.build_kubelet_config(layout, ca_cert=certs.ca_cert, serving=serving))
    )
    for directory in (layout.kubelet, layout.pod_logs, layout.volumes):
        directory.mkdir(parents=True, exist_ok=True)
    record = processes.start(
        "kubelet",
        [
            binary,
            f"--config={config}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={layout.kubelet}",
            f"--cert-dir={layout.config / 'kubelet-pki'}",
            f"--hostname-override={node.NODE_NAME}",
            f"--node-ip={node.NODE_ADDRESS}",
            "--v=1",
        ],
        log=control.logs / "kubelet.log",
    )
    return record


def start_scheduler(binary: Path, control: ControlPlaneLayout) -> ProcessRecord:
    """kube-scheduler (one, no leader election), healthz on loopback."""
    port = processes.free_port()
    record = processes.start(
        "kube-scheduler",
        [
            binary,
            f"--kubeconfig={control.kubeconfig}",
            f"--authentication-kubeconfig={control.kubeconfig}",
            f"--authorization-kubeconfig={control.kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            "--v=1",
        ],
        log=control.logs / "kube-scheduler.log",
    )
    return record


def start_kube_proxy(
    binary: Path, control: ControlPlaneLayout, layout: node.NodeLayout
) -> ProcessRecord:
    """kube-proxy (iptables mode): Service ClusterIPs, the `kubernetes` Service among them."""
    config = layout.config / "kube-proxy.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(node.build_kube_proxy_config(control.kubeconfig)))
    return processes.start(
        "kube-proxy",
        [binary, f"--config={config}", "--v=1"],
        log=control.logs / "kube-proxy.log",
    )


def cleanup_kube_proxy(binary: Path, *, log: Path) -> None:
    """Remove every iptables rule and chain kube-proxy made."""
    with log.open("ab") as out:
        subprocess.run([binary, "--cleanup"], stdout=out, stderr=subprocess.STDOUT, check=False)


def start_coredns(
    binary: Path, control: ControlPlaneLayout, layout: node.NodeLayout
) -> ProcessRecord:
    """CoreDNS serving cluster.local on the node address (the pods' nameserver)."""
    corefile = layout.config / "Corefile"
    corefile.parent.mkdir(parents=True, exist_ok=True)
    corefile.write_text(node.build_corefile(control.kubeconfig))
    return processes.start("coredns", [binary, "-conf", corefile], log=control.logs / "coredns.log")


def start_local_path_provisioner(
    binary: Path, control: ControlPlaneLayout, *, helper_image: str
) -> ProcessRecord:
    """The local-path provisioner (its objects must exist: `node.build_local_path_objects`)."""
    return processes.start(
        "local-path-provisioner",
        [
            binary,
            "start",
            f"--kubeconfig={control.kubeconfig}",
            f"--namespace={node.LOCAL_PATH_NAMESPACE}",
            "--configmap-name=local-path-config",
            "--service-account-name=local-path-provisioner",
            f"--provisioner-name={node.LOCAL_PATH_PROVISIONER_NAME}",
            f"--helper-image={helper_image}",
        ],
        log=control.logs / "local-path-provisioner.log",
    )
