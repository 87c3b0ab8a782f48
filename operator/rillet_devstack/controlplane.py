"""The Kubernetes control plane of the local stack: etcd, kube-apiserver, kube-controller-manager.

With a worker node (`rillet_devstack.node`), the apiserver serves on the node address pods can
route to, authorizes kubelets (Node authorizer, NodeRestriction) and reaches them with a client
certificate; every default controller runs. Without one, pods are created as objects and stay
Pending, which is enough to check what the operator and Spark ask Kubernetes for. RBAC is on;
the admin credential is a static token in `system:masters`, and ServiceAccount tokens are
minted through the TokenRequest API so tests can run code with exactly the rights a Role grants.
"""

from __future__ import annotations

import base64
import secrets
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from rillet_devstack import node, processes
from rillet_devstack import pki as pki_module
from rillet_devstack.processes import ProcessRecord

SERVICE_CIDR = "10.0.0.0/24"
# Controllers the stack needs: garbage collection, namespace deletion, workloads producing pods,
# and default ServiceAccounts with their tokens.
CONTROLLERS = (
    "garbagecollector",
    "namespace",
    "deployment",
    "replicaset",
    "statefulset",
    "job",
    "serviceaccount",
    "serviceaccount-token",
    "endpointslice",
)
# With a node, every default controller (PV binding, node lifecycle, kube-root-ca.crt in each
# namespace for projected ServiceAccount volumes, ...) except node IPAM: the node's pod CIDR is
# fixed in its CNI configuration.
NODE_CONTROLLERS = ("*", "-nodeipam")
ADMIN_USER = "rillet-admin"


@dataclass(frozen=True)
class ControlPlaneLayout:
    """Where the control plane keeps its files inside the state directory."""

    root: Path

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def token_file(self) -> Path:
        return self.root / "pki" / "tokens.csv"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def logs(self) -> Path:
        return self.root / "logs"


def build_kubeconfig(
    *,
    server: str,
    ca_pem: bytes,
    user: str,
    token: str | None = None,
    client_cert: Path | None = None,
    client_key: Path | None = None,
) -> str:
    """A kubeconfig (YAML) for one user of one cluster, by token or by client certificate."""
    credentials: dict[str, str] = {"token": token} if token else {}
    if client_cert and client_key:
        credentials = {"client-certificate": str(client_cert), "client-key": str(client_key)}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "rillet-devstack",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [
            {
                "name": "rillet-devstack",
                "context": {"cluster": "rillet-devstack", "user": user, "namespace": "default"},
            }
        ],
        "current-context": "rillet-devstack",
    }
    return yaml.safe_dump(config, sort_keys=False)


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.write_text(text)


def start_etcd(binary: Path, layout: ControlPlaneLayout) -> tuple[ProcessRecord, int]:
    """Start etcd on a free client port; return it once healthy."""
    client, peer = processes.free_port(), processes.free_port()
    record = processes.start(
        "etcd",
        [
            binary,
            "--name=devstack",
            f"--data-dir={layout.etcd_data}",
            f"--listen-client-urls=http://127.0.0.1:{client}",
            f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=devstack=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ],
        log=layout.logs / "etcd.log",
    )
    processes.wait_ready(
        record,
        lambda: httpx.get(f"http://127.0.0.1:{client}/health").json()["health"] == "true",
        timeout=60,
        what="healthy",
    )
    return record, client


def _node_flags(certs: pki_module.ControlPlanePki, address: str) -> list[str]:
    """What the apiserver needs beside a kubelet: authorize nodes, and a client cert to reach them
    (logs, exec) on their InternalIP."""
    kubelet_client = pki_module.issue(
        certs,
        name="apiserver-kubelet-client",
        common_name="kube-apiserver-kubelet-client",
        organizations=("system:masters",),
    )
    return [
        f"--advertise-address={address}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        f"--kubelet-client-certificate={kubelet_client.cert}",
        f"--kubelet-client-key={kubelet_client.key}",
        "--kubelet-preferred-address-types=InternalIP",
    ]


def start_apiserver(
    binary: Path,
    layout: ControlPlaneLayout,
    *,
    etcd_port: int,
    address: str = "127.0.0.1",
    with_node: bool = False,
) -> tuple[ProcessRecord, int, str]:
    """Start kube-apiserver with RBAC and a static admin token on `address`; return (record, port,
    token). `with_node` adds what a kubelet needs."""
    certs = pki_module.ensure(layout.pki, extra_ips=(address,))
    token = secrets.token_urlsafe(32)
    _write_private(layout.token_file, f'{token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
    port = processes.free_port()
    record = processes.start(
        "kube-apiserver",
        [
            binary,
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            f"--bind-address={address}",
            f"--secure-port={port}",
            f"--cert-dir={layout.pki}",
            f"--tls-cert-file={certs.serving_cert}",
            f"--tls-private-key-file={certs.serving_key}",
            f"--client-ca-file={certs.ca_cert}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--service-account-issuer=https://{address}:{port}",
            f"--service-account-key-file={certs.service_account_public_key}",
            f"--service-account-signing-key-file={certs.service_account_key}",
            f"--token-auth-file={layout.token_file}",
            "--allow-privileged=true",
            "--enable-priority-and-fairness=false",
            "--v=1",
            *(_node_flags(certs, address) if with_node else ["--authorization-mode=RBAC"]),
        ],
        log=layout.logs / "kube-apiserver.log",
    )
    server = f"https://{address}:{port}"
    _write_private(
        layout.kubeconfig,
        build_kubeconfig(
            server=server, ca_pem=certs.ca_cert.read_bytes(), token=token, user=ADMIN_USER
        ),
    )
    verify = ssl.create_default_context(cafile=str(certs.ca_cert))
    headers = {"Authorization": f"Bearer {token}"}

    def ready() -> bool:
        with httpx.Client(base_url=server, verify=verify, headers=headers) as client:
            return (
                client.get("/readyz").status_code == 200
                and client.get("/api/v1/namespaces/default").status_code == 200
            )

    processes.wait_ready(record, ready, timeout=120, what="ready")
    return record, port, token


def start_controller_manager(
    binary: Path, layout: ControlPlaneLayout, *, with_node: bool = False
) -> ProcessRecord:
    """Start kube-controller-manager with the controllers the stack needs."""
    controllers = NODE_CONTROLLERS if with_node else CONTROLLERS
    certs = pki_module.ControlPlanePki(layout.pki)
    record = processes.start(
        "kube-controller-manager",
        [
            binary,
            f"--kubeconfig={layout.kubeconfig}",
            f"--service-account-private-key-file={certs.service_account_key}",
            f"--root-ca-file={certs.ca_cert}",
            "--leader-elect=false",
            "--secure-port=0",
            f"--controllers={','.join(controllers)}",
            "--use-service-account-credentials=false",
            f"--node-monitor-grace-period={node.NODE_MONITOR_GRACE_SECONDS}s",
            "--v=1",
        ],
        log=layout.logs / "kube-controller-manager.log",
    )
    return record


def mint_service_account_token(
    admin_kubeconfig: Path, *, namespace: str, name: str, ttl_seconds: int = 3600
) -> str:
    """A token for a ServiceAccount from the TokenRequest API, signed by the apiserver."""
    from kubernetes import client, config

    api = client.CoreV1Api(
        config.new_client_from_config(config_file=str(admin_kubeconfig))  # type: ignore[no-untyped-call]
    )
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=ttl_seconds)
    )
    response = api.create_namespaced_service_account_token(name, namespace, request)
    if response.status is None or not response.status.token:
        raise RuntimeError(f"TokenRequest for {namespace}/{name} returned no token")
    return str(response.status.token)


def write_service_account_kubeconfig(
    admin_kubeconfig: Path, target: Path, *, namespace: str, name: str
) -> Path:
    """A kubeconfig that acts as the ServiceAccount: exactly the rights its Roles grant."""
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    token = mint_service_account_token(admin_kubeconfig, namespace=namespace, name=name)
    _write_private(
        target,
        build_kubeconfig(
            server=cluster["server"],
            ca_pem=base64.b64decode(cluster["certificate-authority-data"]),
            token=token,
            user=f"{namespace}:{name}",
        ),
    )
    return target


def api_client(layout: ControlPlaneLayout) -> Any:
    """A Kubernetes API client as the stack's admin."""
    from kubernetes import config

    return config.new_client_from_config(config_file=str(layout.kubeconfig))  # type: ignore[no-untyped-call]


def core_api(layout: ControlPlaneLayout) -> Any:
    """The core/v1 API as the stack's admin (untyped: the stack reads a handful of fields)."""
    from kubernetes import client

    return client.CoreV1Api(api_client(layout))


# Set by the node lifecycle controller while a node is (or was last seen) not Ready; it takes
# them off a node that is Ready again only on its next pass (5 s), and until then no pod without
# a toleration is scheduled there.
_NOT_READY_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})


def node_schedulable(layout: ControlPlaneLayout, name: str) -> bool:
    """Node `name` is Ready and no longer tainted as not ready: pods can be scheduled to it."""
    found = core_api(layout).read_node(name)
    ready = any(c.type == "Ready" and c.status == "True" for c in found.status.conditions or [])
    taints = {taint.key for taint in found.spec.taints or []}
    return ready and not taints & _NOT_READY_TAINTS
