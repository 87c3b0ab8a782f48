"""The stack's worker node: containerd + runc + CNI, kubelet, kube-scheduler, kube-proxy, cluster
DNS (CoreDNS) and a default StorageClass (the local-path provisioner kind ships).

Everything runs as host processes of the stack, configured as `../shared/reference/NODE.md`
records it working on these machines. Pods reach the host on `NODE_ADDRESS`, an address on an
otherwise empty bridge (the kernel here has no `dummy` link type): the apiserver and Kafka listen
there, and so does CoreDNS, which is the cluster DNS kubelet hands to pods. The `build_*`
functions are pure (configuration as text or objects); `start_*` start one component each and
return once it serves. Teardown is `rillet_devstack.hostcleanup`'s; containerd's image store
alone outlives it (`release_image_store`, `empty_state_dir`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from rillet_devstack import pki as pki_module
from rillet_devstack import processes
from rillet_devstack.controlplane import ControlPlaneLayout, build_kubeconfig
from rillet_devstack.processes import ProcessRecord

NODE_NAME = "rillet-node"
NODE_ADDRESS = "10.99.0.1"
HOST_BRIDGE = "rillet0"
POD_BRIDGE = "rillet-pods"
POD_CIDR = "10.244.0.0/24"
KUBELET_PORT = 10350
STORAGE_CLASS = "standard"
LOCAL_PATH_NAMESPACE = "local-path-storage"
LOCAL_PATH_PROVISIONER_NAME = "rancher.io/local-path"
# Below this much free disk the kubelet takes no new pods (DiskPressure). An amount, not a
# percentage: these machines report a 252 GB filesystem of which a few GB are theirs, so 1% of it
# tripped with 2.5 GB still free, and new pods stayed Pending behind the DiskPressure taint.
EVICTION_FREE_DISK = "1Gi"
# What `up` wants free once the images are in: the kubelet's floor above, and room for a test
# run's Kafka logs, Spark checkpoints and pod logs (a whole `make test` wrote 0.7 GB).
MIN_FREE_DISK_BYTES = 3 * 2**30
# Node conditions that, when True, stop the kubelet admitting pods.
PRESSURE_CONDITIONS = ("DiskPressure", "MemoryPressure", "PIDPressure")
_FIXES = {
    "DiskPressure": f" (under {EVICTION_FREE_DISK} free where the stack keeps its state: free some"
    " space, `df -h ~/.local/state/rillet`)",
}
# Kernel settings the node's parts change (kubelet, the bridge plugin, kube-proxy): recorded
# before the node starts and put back by `rillet dev down`.
SYSCTLS = (
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.route_localnet",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
)
# Paths outside the state directory that kubelet, containerd and CNI insist on (one node per
# machine): removed on `down` when the node created them.
FIXED_PATHS = (
    Path("/var/lib/kubelet"),
    Path("/var/log/containers"),
    Path("/var/log/pods"),
    Path("/run/containerd"),
    Path("/var/lib/cni"),
    Path("/run/netns"),
    Path("/etc/cni"),
    Path("/opt/cni"),
)


@dataclass(frozen=True)
class NodeLayout:
    """Where the node keeps its files inside the state directory."""

    root: Path

    @property
    def containerd(self) -> Path:
        return self.root / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd / "containerd.sock"

    @property
    def containerd_root(self) -> Path:
        """containerd's images, snapshots and metadata: kept from one `up` to the next when the
        last `down` released it (`image_store_released`)."""
        return self.containerd / "root"

    @property
    def image_store_released(self) -> Path:
        """A marker: `down` removed every container, so the root holds images only."""
        return self.containerd / "root-holds-images-only"

    @property
    def cni_config(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_ipam(self) -> Path:
        return self.root / "cni" / "ipam"

    @property
    def kubelet(self) -> Path:
        return self.root / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    @property
    def volumes(self) -> Path:
        """Where the local-path provisioner puts PersistentVolumes."""
        return self.root / "volumes"

    @property
    def config(self) -> Path:
        return self.root / "config"


# --- configuration (pure) ----------------------------------------------------------------------


def build_containerd_config(layout: NodeLayout, *, sandbox_image: str) -> str:
    """containerd's config.toml: its own root, state and socket; CRI with runc and our CNI."""
    c = layout.containerd
    return f"""version = 2
root = "{layout.containerd_root}"
state = "{c / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", \
"io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{layout.containerd_socket}"
[ttrpc]
  address = "{layout.containerd_socket}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{c / "opt"}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  # Root here lacks CAP_SYS_RESOURCE: runc cannot set a negative oom_score_adj and fails with
  # "can't get final child's PID from pipe: EOF" unless told not to try.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{layout.cni_config}"
    max_conf_num = 1
"""


def build_cni_config(layout: NodeLayout) -> dict[str, Any]:
    """The pod network: one bridge, host-local addresses, no masquerading.

    `loopback` stays out of the chain (containerd sets up `lo` itself), and `ipMasq` is off
    because the bridge plugin's masquerade rules outlived the pods.
    """
    return {
        "cniVersion": "0.4.0",
        "name": "rillet-pods",
        "plugins": [
            {
                "type": "bridge",
                "bridge": POD_BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(layout.cni_ipam),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def build_kubelet_config(
    layout: NodeLayout, *, ca_cert: Path, serving: pki_module.IssuedCertificate
) -> dict[str, Any]:
    """KubeletConfiguration for this machine: cgroup v1 with cgroupfs, no image GC (images are
    imported, not pulled: a collected image could not come back), CoreDNS on the node address."""
    socket = f"unix://{layout.containerd_socket}"
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_ADDRESS,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10358,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_cert)},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(serving.cert),
        "tlsPrivateKeyFile": str(serving.key),
        "containerRuntimeEndpoint": socket,
        "imageServiceEndpoint": socket,
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "podLogsDir": str(layout.pod_logs),
        "resolvConf": "",
        "clusterDomain": "cluster.local",
        "clusterDNS": [NODE_ADDRESS],
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": EVICTION_FREE_DISK,
            "imagefs.available": EVICTION_FREE_DISK,
            "nodefs.inodesFree": "1%",
        },
        # Space freed is usable within a minute, not after the default five.
        "evictionPressureTransitionPeriod": "30s",
        "serializeImagePulls": False,
        "maxPods": 60,
        # Pods are deleted in seconds, not after the default 30 s sync of a terminated pod.
        "syncFrequency": "10s",
    }


def build_kube_proxy_config(kubeconfig: Path) -> dict[str, Any]:
    """kube-proxy in iptables mode that changes no sysctl (conntrack limits and timeouts 0)."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": NODE_NAME,
        "mode": "iptables",
        "clusterCIDR": POD_CIDR,
        "detectLocalMode": "ClusterCIDR",
        "nodePortAddresses": ["primary"],
        "iptables": {"localhostNodePorts": False},
        "healthzBindAddress": "127.0.0.1:10356",
        "metricsBindAddress": "127.0.0.1:10349",
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
            "udpTimeout": "0s",
            "udpStreamTimeout": "0s",
        },
    }


def build_corefile(kubeconfig: Path) -> str:
    """CoreDNS answering cluster.local names (Services, pods) on the node address."""
    return f""".:53 {{
    bind {NODE_ADDRESS}
    errors
    health 127.0.0.1:10354
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig} rillet-devstack
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 10
    loop
}}
"""


def build_local_path_objects(*, helper_image: str, volumes: Path) -> list[dict[str, Any]]:
    """The local-path provisioner's namespace, ServiceAccount and ConfigMap, and the default
    StorageClass it serves (WaitForFirstConsumer, as on kind: a volume lands where its pod runs).
    """
    helper_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "helper-pod"},
        "spec": {
            "containers": [
                {"name": "helper-pod", "image": helper_image, "imagePullPolicy": "Never"}
            ]
        },
    }
    config = {
        "nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [str(volumes)]}]
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LOCAL_PATH_NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "local-path-provisioner", "namespace": LOCAL_PATH_NAMESPACE},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "local-path-config", "namespace": LOCAL_PATH_NAMESPACE},
            "data": {
                "config.json": json.dumps(config),
                # World-writable, as kind's: the pods run as any non-root uid.
                "setup": 'set -eu\nmkdir -m 0777 -p "$VOL_DIR"\n',
                "teardown": 'set -eu\nrm -rf "$VOL_DIR"\n',
                "helperPod.yaml": yaml.safe_dump(helper_pod),
            },
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": STORAGE_CLASS,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": LOCAL_PATH_PROVISIONER_NAME,
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Delete",
        },
    ]


# --- starting ------------------------------------------------------------------------------------


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def link_exists(name: str) -> bool:
    """True when a network link of this name exists."""
    return Path(f"/sys/class/net/{name}").exists()


def create_host_bridge() -> None:
    """The node address on an empty bridge: pods route to it, and host processes reach it too."""
    if not link_exists(HOST_BRIDGE):
        _ip("link", "add", HOST_BRIDGE, "type", "bridge")
    existing = subprocess.run(
        ["ip", "-o", "addr", "show", "dev", HOST_BRIDGE], capture_output=True, text=True
    ).stdout
    if f" {NODE_ADDRESS}/" not in existing:
        _ip("addr", "add", f"{NODE_ADDRESS}/32", "dev", HOST_BRIDGE)
    _ip("link", "set", HOST_BRIDGE, "up")


def read_sysctls() -> dict[str, str]:
    """The current values of the settings the node may change (those this kernel has)."""
    values = {}
    for name in SYSCTLS:
        path = Path("/proc/sys") / name.replace(".", "/")
        if path.exists():
            values[name] = path.read_text().strip()
    return values


def existing_fixed_paths() -> list[Path]:
    """The fixed paths that exist before the node starts (and so are not the node's to remove)."""
    return [path for path in FIXED_PATHS if path.exists()]


def start_containerd(layout: NodeLayout, *, sandbox_image: str, logs: Path) -> ProcessRecord:
    """containerd with the node's config; returns once its socket answers."""
    layout.containerd.mkdir(parents=True, exist_ok=True)
    layout.cni_config.mkdir(parents=True, exist_ok=True)
    (layout.cni_config / "10-rillet.conflist").write_text(json.dumps(build_cni_config(layout)))
    config = layout.containerd / "config.toml"
    config.write_text(build_containerd_config(layout, sandbox_image=sandbox_image))
    record = processes.start(
        "containerd", ["containerd", "--config", config], log=logs / "containerd.log"
    )

    def serving() -> bool:
        return (
            subprocess.run(
                ["ctr", "-a", str(layout.containerd_socket), "version"],
                capture_output=True,
                timeout=10,
            ).returncode
            == 0
        )

    processes.wait_ready(record, serving, timeout=60, what="serving")
    return record


def release_image_store(layout: NodeLayout) -> bool:
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
    but the node's image store when the last `down` released it: importing the images into
    containerd again takes most of a minute. The files CRI kept for the last run's sandboxes
    go with the rest."""
    layout = NodeLayout(root / "node")
    if not layout.image_store_released.exists() or not layout.containerd_root.is_dir():
        shutil.rmtree(root, ignore_errors=True)
        return
    aside = root.with_name(f"{root.name}.image-store")  # beside it: a rename, not a copy
    shutil.rmtree(aside, ignore_errors=True)
    layout.containerd_root.rename(aside)
    shutil.rmtree(root, ignore_errors=True)
    layout.containerd.mkdir(parents=True)
    aside.rename(layout.containerd_root)
    shutil.rmtree(layout.containerd_root / "io.containerd.grpc.v1.cri", ignore_errors=True)


def write_node_kubeconfig(control: ControlPlaneLayout, layout: NodeLayout, *, server: str) -> Path:
    """The kubelet's credentials: a client certificate in system:nodes, as NodeRestriction wants."""
    certs = pki_module.ControlPlanePki(control.pki)
    client = pki_module.issue(
        certs,
        name="kubelet-client",
        common_name=f"system:node:{NODE_NAME}",
        organizations=("system:nodes",),
    )
    path = layout.config / "kubelet.kubeconfig"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        build_kubeconfig(
            server=server,
            ca_pem=certs.ca_cert.read_bytes(),
            user=f"system:node:{NODE_NAME}",
            client_cert=client.cert,
            client_key=client.key,
        )
    )
    path.chmod(0o600)
    return path


def start_kubelet(
    binary: Path, control: ControlPlaneLayout, layout: NodeLayout, *, server: str
) -> ProcessRecord:
    """kubelet registering NODE_NAME on NODE_ADDRESS; returns once the apiserver has the node."""
    certs = pki_module.ControlPlanePki(control.pki)
    serving = pki_module.issue(
        certs,
        name="kubelet-serving",
        common_name=NODE_NAME,
        ips=(NODE_ADDRESS,),
        dns_names=(NODE_NAME,),
    )
    kubeconfig = write_node_kubeconfig(control, layout, server=server)
    config = layout.config / "kubelet.yaml"
    config.write_text(
        yaml.safe_dump(build_kubelet_config(layout, ca_cert=certs.ca_cert, serving=serving))
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
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={NODE_ADDRESS}",
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
    binary: Path, control: ControlPlaneLayout, layout: NodeLayout
) -> ProcessRecord:
    """kube-proxy (iptables mode): Service ClusterIPs, the `kubernetes` Service among them."""
    config = layout.config / "kube-proxy.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(build_kube_proxy_config(control.kubeconfig)))
    return processes.start(
        "kube-proxy",
        [binary, f"--config={config}", "--v=1"],
        log=control.logs / "kube-proxy.log",
    )


def cleanup_kube_proxy(binary: Path, *, log: Path) -> None:
    """Remove every iptables rule and chain kube-proxy made."""
    with log.open("ab") as out:
        subprocess.run([binary, "--cleanup"], stdout=out, stderr=subprocess.STDOUT, check=False)


def start_coredns(binary: Path, control: ControlPlaneLayout, layout: NodeLayout) -> ProcessRecord:
    """CoreDNS serving cluster.local on the node address (the pods' nameserver)."""
    corefile = layout.config / "Corefile"
    corefile.parent.mkdir(parents=True, exist_ok=True)
    corefile.write_text(build_corefile(control.kubeconfig))
    return processes.start("coredns", [binary, "-conf", corefile], log=control.logs / "coredns.log")


def start_local_path_provisioner(
    binary: Path, control: ControlPlaneLayout, *, helper_image: str
) -> ProcessRecord:
    """The local-path provisioner (its objects must exist: `build_local_path_objects`)."""
    return processes.start(
        "local-path-provisioner",
        [
            binary,
            "start",
            f"--kubeconfig={control.kubeconfig}",
            f"--namespace={LOCAL_PATH_NAMESPACE}",
            "--configmap-name=local-path-config",
            "--service-account-name=local-path-provisioner",
            f"--provisioner-name={LOCAL_PATH_PROVISIONER_NAME}",
            f"--helper-image={helper_image}",
        ],
        log=control.logs / "local-path-provisioner.log",
    )


def why_pods_wait(found: dict[str, Any]) -> list[str]:
    """What keeps the node (its API object, as JSON) from running new pods, one line each; empty
    when nothing does. A pod's own events say the same, but only once a test has waited for it."""
    status, spec = found.get("status") or {}, found.get("spec") or {}
    conditions = {c["type"]: c for c in status.get("conditions") or []}
    reasons = []
    ready = conditions.get("Ready", {})
    if ready.get("status") != "True":
        said = f": {ready['message']}" if ready.get("message") else ""
        reasons.append(f"Ready={ready.get('status', 'Unknown')}{said}")
    for kind in PRESSURE_CONDITIONS:
        if conditions.get(kind, {}).get("status") == "True":
            reasons.append(f"{kind}: {conditions[kind].get('message', '')}{_FIXES.get(kind, '')}")
    for taint in spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute"):
            reasons.append(f"taint {taint['key']}:{taint['effect']}")
    return reasons


def unattended_pods(
    pods: list[dict[str, Any]], *, now: datetime, patience: timedelta = timedelta(seconds=60)
) -> list[str]:
    """The Pending pods (API objects, as JSON) that neither the scheduler nor the kubelet has
    acted on for longer than `patience`, each with who it waits for. The scheduler looks at a pod
    (a node, or a PodScheduled condition saying why none), then the kubelet reports its
    containers (ContainerCreating at least): a pod that gets neither points to one of them
    stuck or gone."""
    unattended = []
    for pod in pods:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        created = datetime.fromisoformat(meta["creationTimestamp"].replace("Z", "+00:00"))
        if status.get("phase") != "Pending" or now - created <= patience:
            continue
        looked_at = any(c.get("type") == "PodScheduled" for c in status.get("conditions") or [])
        started = status.get("containerStatuses") or status.get("initContainerStatuses")
        if not spec.get("nodeName") and not looked_at:
            unattended.append(f"{meta['namespace']}/{meta['name']} (the scheduler)")
        elif spec.get("nodeName") and not started:
            unattended.append(f"{meta['namespace']}/{meta['name']} (the kubelet)")
    return unattended


def too_little_disk(path: Path, *, minimum: int = MIN_FREE_DISK_BYTES) -> str | None:
    """Why the filesystem holding `path` is too full for the node, or None when it is not."""
    free = shutil.disk_usage(path).free
    if free >= minimum:
        return None
    return (
        f"{free / 2**30:.1f} GiB free on the filesystem of {path}, and the node needs "
        f"{minimum / 2**30:.0f} GiB: below {EVICTION_FREE_DISK} its kubelet takes no pods "
        "(DiskPressure), and a test run writes Kafka logs, checkpoints and pod logs there"
    )


def can_run_node() -> str | None:
    """Why this machine cannot run the node, or None when it can (its Debian packages are
    installed by `rillet_devstack.packages` when missing)."""
    if not sys.platform.startswith("linux"):
        return "a worker node needs Linux"
    if os.geteuid() != 0:
        return "a worker node needs root (containerd, kubelet and CNI change the network)"
    return None
