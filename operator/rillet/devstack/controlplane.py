"""The Kubernetes control plane of the local stack: etcd, kube-apiserver, kube-controller-manager.

There is no scheduler and no kubelet: pods are created as objects and stay Pending, which is
enough to check everything the operator and Spark ask Kubernetes for. RBAC is on; the admin
credential is a static token in `system:masters`, and ServiceAccount tokens are minted through
the TokenRequest API so tests can run code with exactly the rights a Role grants.
"""

from __future__ import annotations

import base64
import secrets
import ssl
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

from rillet.devstack import pki as pki_module
from rillet.devstack import processes
from rillet.devstack.processes import ProcessRecord

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


def build_kubeconfig(*, server: str, ca_pem: bytes, token: str, user: str) -> str:
    """A kubeconfig (YAML) for one token-authenticated user of one cluster."""
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
        "users": [{"name": user, "user": {"token": token}}],
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


def start_apiserver(
    binary: Path, layout: ControlPlaneLayout, *, etcd_port: int
) -> tuple[ProcessRecord, int, str]:
    """Start kube-apiserver with RBAC and a static admin token; return (record, port, token)."""
    certs = pki_module.ensure(layout.pki)
    token = secrets.token_urlsafe(32)
    _write_private(layout.token_file, f'{token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
    port = processes.free_port()
    record = processes.start(
        "kube-apiserver",
        [
            binary,
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={layout.pki}",
            f"--tls-cert-file={certs.serving_cert}",
            f"--tls-private-key-file={certs.serving_key}",
            f"--client-ca-file={certs.ca_cert}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--service-account-issuer=https://127.0.0.1:{port}",
            f"--service-account-key-file={certs.service_account_public_key}",
            f"--service-account-signing-key-file={certs.service_account_key}",
            "--authorization-mode=RBAC",
            f"--token-auth-file={layout.token_file}",
            "--allow-privileged=true",
            "--enable-priority-and-fairness=false",
            "--v=1",
        ],
        log=layout.logs / "kube-apiserver.log",
    )
    server = f"https://127.0.0.1:{port}"
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


def start_controller_manager(binary: Path, layout: ControlPlaneLayout) -> ProcessRecord:
    """Start kube-controller-manager with the controllers the stack needs."""
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
            f"--controllers={','.join(CONTROLLERS)}",
            "--use-service-account-credentials=false",
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
