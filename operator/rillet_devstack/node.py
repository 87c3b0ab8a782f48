"""The stack's worker node: containerd + runc + CNI, kubelet, kube-scheduler, kube-proxy, cluster
DNS (CoreDNS) and a default StorageClass (the local-path provisioner kind ships).

Everything runs as host processes of the stack, configured as `../shared/reference/NODE.md`
records it working on these machines. Pods reach the host on `NODE_ADDRESS`, an address on an
otherwise empty bridge (the kernel here has no `dummy` link type): the apiserver and Kafka listen
there, and so does CoreDNS, which is the cluster DNS kubelet hands to pods. This module
holds the node's names, addresses and file layout, and its configuration: the `build_*`
functions are pure (configuration as text or objects). Starting the components is noderunning's,
telling why the node takes no pods nodechecking's; teardown is `rillet_devstack.hostcleanup`'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rillet_devstack import pki as pki_module

NODE_NAME = "rillet-node"
NODE_ADDRESS = "10.99.0.1"
HOST_BRIDGE = "rillet0"
POD_BRIDGE = "rillet-pods"
POD_CIDR = "10.244.0.0/24"
KUBELET_PORT = 10350
# A node that stops renewing its Lease is NotReady this many seconds later (Kubernetes' default
# is 50): a node lost on the local stack shows in ~20 s, not ~50 s, and so do the App's
# ExecutorsLost and DriverNodeLost. Each kubelet renews every quarter of its Lease's duration
# (5 s): four renewals can be missed on a busy machine before the node is called lost.
NODE_MONITOR_GRACE_SECONDS = 20
# Every node's pods, as kube-proxy tells them from outside traffic: node N has 10.244.(N-1).0/24.
CLUSTER_CIDR = "10.244.0.0/16"
STORAGE_CLASS = "standard"
LOCAL_PATH_NAMESPACE = "local-path-storage"
LOCAL_PATH_PROVISIONER_NAME = "rancher.io/local-path"
# Below this much free disk the kubelet takes no new pods (DiskPressure). An amount, not a
# percentage: these machines report a 252 GB filesystem of which a few GB are theirs, so 1% of it
# tripped with 2.5 GB still free, and new pods stayed Pending behind the DiskPressure taint.
EVICTION_FREE_DISK = "1Gi"
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
class NodeSpec:
    """One worker node's names and addresses. Node 1 runs in the host's network namespace; an
    extra node (`rillet_devstack.extranodes`) in its own, behind a veth pair."""

    index: int
    name: str
    address: str  # its InternalIP: where the apiserver reaches its kubelet
    pod_cidr: str
    pod_bridge: str
    cgroup_root: str | None = None  # kubelet's cgroupRoot; None: the hierarchies' root


FIRST = NodeSpec(
    index=1, name=NODE_NAME, address=NODE_ADDRESS, pod_cidr=POD_CIDR, pod_bridge=POD_BRIDGE
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


def build_cni_config(layout: NodeLayout, *, spec: NodeSpec = FIRST) -> dict[str, Any]:
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
                "bridge": spec.pod_bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": spec.pod_cidr}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(layout.cni_ipam),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def build_kubelet_config(
    layout: NodeLayout,
    *,
    ca_cert: Path,
    serving: pki_module.IssuedCertificate,
    spec: NodeSpec = FIRST,
) -> dict[str, Any]:
    """KubeletConfiguration for this machine: cgroup v1 with cgroupfs, no image GC (images are
    imported, not pulled: a collected image could not come back), CoreDNS on node 1's address.
    An extra node's kubelet keeps to its own cgroup root: each kubelet removes the pod cgroups
    under its root that it does not know, so two on one root would remove each other's."""
    socket = f"unix://{layout.containerd_socket}"
    root = {"cgroupRoot": spec.cgroup_root} if spec.cgroup_root else {}
    return root | {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": spec.address,
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
        "nodeLeaseDurationSeconds": NODE_MONITOR_GRACE_SECONDS,
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


def build_kube_proxy_config(kubeconfig: Path, *, spec: NodeSpec = FIRST) -> dict[str, Any]:
    """kube-proxy in iptables mode that changes no sysctl (conntrack limits and timeouts 0).
    Traffic from any node's pods is local (CLUSTER_CIDR): from another node's pod to a
    ClusterIP it is not masqueraded."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": spec.name,
        "mode": "iptables",
        "clusterCIDR": CLUSTER_CIDR,
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
