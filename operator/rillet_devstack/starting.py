"""Starting the local stack: provision what is missing, then start its processes in order
(control plane, the node with the project's images, Kafka), each recorded as soon as it runs so
that a failed or interrupted start is undone by `rillet dev down`; or reuse the running stack,
with images rebuilt from the sources as they are now.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from rillet_devstack import (
    controlplane,
    debootstrapping,
    images,
    importing,
    networkpolicies,
    node,
    nodechecking,
    nodegrowing,
    noderunning,
    objectstoring,
    packages,
    paths,
    pki,
    processes,
    provisioning,
    reporting,
    schemaregistering,
    stack,
    stopping,
    toolchain,
    versions,
)
from rillet_devstack.controlplane import ControlPlaneLayout
from rillet_devstack.kafka import KafkaCluster, secure
from rillet_devstack.processes import ProcessRecord

# The repository this stack builds images from (an editable install: operator/rillet_devstack).
REPOSITORY = Path(__file__).resolve().parents[2]


class NodeUnavailableError(RuntimeError):
    """This machine cannot run the worker node; the message says why and what to use instead."""


def up(
    *,
    brokers: int = 1,
    with_node: bool = True,
    secured: bool = False,
    nodes: int = 1,
    object_store: bool = False,
    schema_registry: bool = False,
    report: reporting.Reporter = reporting.silent,
) -> stack.StackState:
    """Start the stack (reusing a running one of the same shape) and return it.

    `secured`: Kafka on SASL_SSL with SCRAM users and ACLs enforced (see devstack.kafka).
    `nodes`: at least this many worker nodes run (extranodes); a running stack gets the
    missing ones, and keeps any more it has.
    `object_store`: an S3 store with a bucket and a Secret with its key (devstack.objectstore);
    a running stack with one is reused when none is asked for, as one with more nodes is.
    `schema_registry`: a schema registry with the Confluent API and a Secret with its user
    (devstack.schemaregistry); reused in the same way.
    """
    if nodes > 1 and not with_node:
        raise NodeUnavailableError("--nodes needs the worker node: drop --no-node")
    current = stack.running()
    if current and current.serves(
        brokers=brokers,
        with_node=with_node,
        secured=secured,
        object_store=object_store,
        schema_registry=schema_registry,
    ):
        # Another checkout may have started it: what follows the checkout is made for this one.
        _provision(provisioning.CHECKOUT_ARTEFACTS, report=report)
        current = with_current_images(current, report=report)
        return nodegrowing.ensure(current, count=nodes, report=report)
    if with_node and (reason := nodechecking.can_run_node()):
        raise NodeUnavailableError(
            f"{reason}; `rillet dev up --no-node` starts the stack without it"
        )
    if schema_registry:
        schemaregistering.java()  # no JDK for it: said before anything stops or builds
    if with_node and (wanted := packages.missing_packages()):
        with report(f"install {' '.join(wanted)} (apt, once)"):
            packages.ensure_installed(wanted, log=paths.cache_dir() / "apt-install.log")
    stopping.down()
    needed = provisioning.artefacts(
        with_node=with_node, with_object_store=object_store, with_schema_registry=schema_registry
    )
    _provision(needed, report=report)
    state = _start(
        brokers=brokers,
        with_node=with_node,
        secured=secured,
        object_store=object_store,
        schema_registry=schema_registry,
        report=report,
    )
    return nodegrowing.ensure(state, count=nodes, report=report)


def _provision(artefacts: Iterable[provisioning.Artefact], *, report: reporting.Reporter) -> None:
    """Build those of the artefacts that are not cached yet, each shown as a step."""
    needed = provisioning.missing(artefacts)
    toolchain.require(provisioning.tools_for(needed) | {"java"})
    for artefact in needed:
        with report(f"build {artefact.name} v{artefact.version} (cached afterwards)") as update:
            provisioning.provision(artefact, update or reporting.no_progress)


def _start(
    *,
    brokers: int,
    with_node: bool,
    secured: bool,
    object_store: bool,
    schema_registry: bool,
    report: reporting.Reporter,
) -> stack.StackState:
    root = paths.state_dir()
    noderunning.empty_state_dir(root)
    layout = ControlPlaneLayout(root)
    address = node.NODE_ADDRESS if with_node else "127.0.0.1"
    state = stack.StackState(
        processes=[],
        kubeconfig=layout.kubeconfig,
        apiserver="",
        kafka_bootstrap="",
        kafka_brokers=brokers,
    )
    if with_node:
        node_layout = node.NodeLayout(root / "node")
        state.node = stack.NodeState(
            root=node_layout.root,
            containerd_socket=node_layout.containerd_socket,
            sysctls=noderunning.read_sysctls(),
            preexisting_paths=noderunning.existing_fixed_paths(),
        )
    try:
        _start_control_plane(state, layout, address=address, report=report)
        if with_node:
            _start_node(state, layout, report=report)
        listener = "SASL_SSL, SCRAM-SHA-512, ACLs" if secured else "PLAINTEXT"
        with report(f"kafka ({brokers} broker{'s' if brokers > 1 else ''}, {listener})"):
            if secured:
                authority = pki.ControlPlanePki(layout.pki)
                state.kafka_security = secure(authority, host=address)
            cluster = KafkaCluster(
                libs=provisioning.KAFKA.directory / "libs",
                root=root / "kafka",
                brokers=brokers,
                heap="512m" if brokers == 1 else "384m",
                host=address,
                security=state.kafka_security,
            )
            kafka_records, state.kafka_bootstrap = cluster.start()
            stack.record_started(state, *kafka_records)
        if object_store:
            with report("object store (SeaweedFS, S3 API, bucket, Secret)"):
                objectstoring.run(state, layout, root=root / "objectstore", address=address)
        if schema_registry:
            with report("schema registry (Apicurio Registry, Confluent API, Secret)"):
                schemaregistering.run(state, layout, root=root / "schema-registry", address=address)
    except BaseException:
        stopping.stop(state)
        raise
    return state


def _start_control_plane(
    state: stack.StackState, layout: ControlPlaneLayout, *, address: str, report: reporting.Reporter
) -> None:
    kube_bin = provisioning.KUBERNETES.directory
    with_node = state.node is not None
    if with_node:
        with report("node address"):
            noderunning.create_host_bridge()
    with report("etcd"):
        etcd, etcd_port = controlplane.start_etcd(provisioning.ETCD.directory / "etcd", layout)
        stack.record_started(state, etcd)
    with report("kube-apiserver"):
        apiserver, port, token = controlplane.start_apiserver(
            kube_bin / "kube-apiserver",
            layout,
            etcd_port=etcd_port,
            address=address,
            with_node=with_node,
        )
        state.apiserver = f"https://{address}:{port}"
        stack.record_started(state, apiserver)
    with report("kube-controller-manager"):
        manager = controlplane.start_controller_manager(
            kube_bin / "kube-controller-manager", layout, with_node=with_node
        )
        stack.record_started(state, manager)
        _wait_default_service_account(manager, layout, server=state.apiserver, token=token)


def _start_node(
    state: stack.StackState, layout: ControlPlaneLayout, *, report: reporting.Reporter
) -> None:
    """Scheduler, containerd with the stack's images, kubelet, kube-proxy, DNS, storage."""
    assert state.node is not None
    node_layout = node.NodeLayout(state.node.root)
    node_bin = provisioning.KUBERNETES_NODE.directory
    with report("kube-scheduler"):
        stack.record_started(
            state, noderunning.start_scheduler(node_bin / "kube-scheduler", layout)
        )
    with report("containerd"):
        stack.record_started(
            state,
            noderunning.start_containerd(
                node_layout, sandbox_image=versions.PAUSE_IMAGE, logs=layout.logs
            ),
        )
    state.node.images = _images(node_layout, report=report)
    state.node.chart_images = _tag_chart_names(
        state.node.images, socket=node_layout.containerd_socket
    )
    # Checked once the images are in, as they take the most: a node short of disk would start,
    # report Ready, and leave every pod Pending behind a DiskPressure taint.
    if short := nodechecking.too_little_disk(node_layout.root):
        raise NodeUnavailableError(f"{short}; free some space and run `rillet dev up` again")
    with report("kubelet"):
        kubelet = noderunning.start_kubelet(
            node_bin / "kubelet", layout, node_layout, server=state.apiserver
        )
        stack.record_started(state, kubelet)
        processes.wait_ready(
            kubelet,
            lambda: controlplane.node_schedulable(layout, node.NODE_NAME),
            timeout=90,
            what=f"{node.NODE_NAME} Ready",
        )
    with report("kube-proxy, NetworkPolicy enforcement, CoreDNS"):
        stack.record_started(
            state, noderunning.start_kube_proxy(node_bin / "kube-proxy", layout, node_layout)
        )
        stack.record_started(
            state,
            networkpolicies.start(
                provisioning.NETWORK_POLICIES.directory / networkpolicies.BINARY,
                kubeconfig=layout.kubeconfig,
                node_name=node.NODE_NAME,
                log=layout.logs / "networkpolicies.log",
            ),
        )
        stack.record_started(
            state,
            noderunning.start_coredns(
                provisioning.COREDNS.directory / "coredns", layout, node_layout
            ),
        )
    with report(f"StorageClass {node.STORAGE_CLASS} (local-path provisioner)"):
        _apply(
            layout,
            node.build_local_path_objects(
                helper_image=versions.BASE_IMAGE, volumes=node_layout.volumes
            ),
        )
        stack.record_started(
            state,
            noderunning.start_local_path_provisioner(
                provisioning.LOCAL_PATH.directory / "local-path-provisioner",
                layout,
                helper_image=versions.BASE_IMAGE,
            ),
        )


def with_current_images(
    state: stack.StackState, *, report: reporting.Reporter = reporting.silent
) -> stack.StackState:
    """A reused stack runs the images of the sources as they are now: changed Dockerfiles or
    operator code are rebuilt (unchanged ones cost a content hash) and imported."""
    if state.node is None:
        return state
    socket = node.NodeLayout(state.node.root).containerd_socket
    built = images.build_project_images(REPOSITORY, report=report)
    for name, image in built.items():
        if state.node.images.get(name) != image:
            importing.import_into_containerd(image, socket=socket, report=report)
    chart_images = _tag_chart_names(built, socket=socket)
    # The builds take minutes, in which another process may have grown the stack by a node:
    # the record read now is the one to update (and whose nodes get the images), not `state`.
    state = stack.load() or state
    assert state.node is not None
    if built != state.node.images or chart_images != state.node.chart_images:
        state.node.images, state.node.chart_images = built, chart_images
        stack.save(state)
    nodegrowing.sync_images(state, report=report)
    return state


def _tag_chart_names(built: dict[str, str], *, socket: Path) -> dict[str, str]:
    """Name the project's images as the chart and the examples do, as `kind load` would: their
    manifests then run on the stack unchanged."""
    named = images.chart_references(images.CHART.read_text())
    for name, reference in named.items():
        importing.tag(built[name], reference, socket=socket)
    return named


def _images(node_layout: node.NodeLayout, *, report: reporting.Reporter) -> dict[str, str]:
    """Build (or find cached) the pause, base and project images; import them into containerd.

    The image builds report each of their steps themselves (one span at a time)."""
    socket = node_layout.containerd_socket
    for image in (images.build_pause(report=report), debootstrapping.build_base(report=report)):
        importing.import_into_containerd(image, socket=socket, report=report)
    built = images.build_project_images(REPOSITORY, report=report)
    for image in built.values():
        importing.import_into_containerd(image, socket=socket, report=report)
    importing.remove_stale_images(
        [versions.PAUSE_IMAGE, versions.BASE_IMAGE, *built.values()], socket=socket
    )
    return built


def _apply(layout: ControlPlaneLayout, objects: list[dict[str, Any]]) -> None:
    from kubernetes import utils

    api = controlplane.api_client(layout)
    for item in objects:
        utils.create_from_dict(api, item)  # type: ignore[no-untyped-call]


def _wait_default_service_account(
    manager: ProcessRecord, layout: ControlPlaneLayout, *, server: str, token: str
) -> None:
    """The controller-manager is working once it has made namespace default's ServiceAccount."""
    verify = ssl.create_default_context(cafile=str(layout.pki / "ca.crt"))

    def default_service_account_exists() -> bool:
        response = httpx.get(
            f"{server}/api/v1/namespaces/default/serviceaccounts/default",
            headers={"Authorization": f"Bearer {token}"},
            verify=verify,
        )
        return response.status_code == 200

    processes.wait_ready(
        manager, default_service_account_exists, timeout=90, what="creating ServiceAccounts"
    )
