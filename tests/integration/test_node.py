"""The stack's worker node runs what users run: Rillet's own images, as pods.

Test plan:
- the node is Ready, and a pod of the runtime image reads a topic of the stack's broker through
  Spark's Kafka connector over the pod network: `kubectl logs` shows the records;
- that pod is admitted and runs in a namespace that enforces the `restricted` Pod Security level;
- a PVC of the default StorageClass binds, and data written by one pod is read back by the next;
- cluster DNS resolves Service names from pods;
- a pod's network namespace is pinned inside /run/netns, a shared mount of its own, so a node
  added later (`ip netns add`) cannot cover the pin and wedge the pod's deletion.
(The chart's operator image on the node: test_node_chart.py.)
Every pod here runs on node 1 (a nodeSelector): these tests are not in the node's xdist group,
and that group's tests stop node 2 as a crash would.
(That `rillet dev down` leaves nothing behind is checked when the session's stack goes down:
see the `stack` fixture.)
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from rillet_devstack import node as devnode
from rillet_devstack import stack as devstack

from .conftest import Kube
from .objects import get
from .podlogs import pod_log
from .polling import wait_for

# The restricted profile, spelled out as a user's pod would have to.
RESTRICTED_POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 10001,
    "fsGroup": 10001,
    "seccompProfile": {"type": "RuntimeDefault"},
}
RESTRICTED_CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}
# Node 1, which no test stops (the node group's tests stop node 2 while these run).
ON_NODE_1 = {"kubernetes.io/hostname": devnode.NODE_NAME}


def _pod(name: str, image: str, command: list[str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": ON_NODE_1,
            "securityContext": RESTRICTED_POD_SECURITY,
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": command,
                    "securityContext": RESTRICTED_CONTAINER_SECURITY,
                    **spec.pop("container", {}),
                }
            ],
            **spec,
        },
    }


def _create(kube: Kube, namespace: str, *manifests: dict[str, Any]) -> None:
    for manifest in manifests:
        kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))


def _phase(kube: Kube, namespace: str, pod: str) -> str:
    return str(get(kube, "pod", pod, namespace).get("status", {}).get("phase", ""))


def _wait_succeeded(kube: Kube, namespace: str, pod: str, *, timeout: float) -> str:
    """Wait until the pod ends; fail with its logs unless it succeeded; return its logs."""
    phase = wait_for(
        lambda: p if (p := _phase(kube, namespace, pod)) in ("Succeeded", "Failed") else None,
        timeout=timeout,
        interval=1,
        what=f"pod {namespace}/{pod} to finish",
    )
    logs = pod_log(kube, namespace, pod)
    assert phase == "Succeeded", f"pod {pod} {phase}:\n{logs[-3000:]}"
    return logs


def test_the_node_is_ready(kube: Kube, node_stack: devstack.StackState) -> None:
    found = json.loads(kube.kubectl("get", "node", devnode.NODE_NAME, "-o", "json").stdout)
    ready = {c["type"]: c["status"] for c in found["status"]["conditions"]}["Ready"]
    assert ready == "True"
    addresses = {a["type"]: a["address"] for a in found["status"]["addresses"]}
    assert addresses["InternalIP"] == devnode.NODE_ADDRESS


READ_TOPIC = """
import os, sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]")
         .config("spark.jars", os.environ["RILLET_SPARK_JARS"].replace(":", ","))
         .config("spark.ui.enabled", "false").getOrCreate())
rows = (spark.read.format("kafka").option("kafka.bootstrap.servers", sys.argv[1])
        .option("subscribe", sys.argv[2]).load()
        .selectExpr("CAST(value AS STRING) AS value").collect())
for row in sorted(r.value for r in rows):
    print("record:", row)
"""


def test_a_runtime_pod_reads_kafka_through_sparks_connector(
    kube: Kube,
    node_stack: devstack.StackState,
    restricted_namespace: str,
    kafka_admin: AdminClient,
) -> None:
    name = f"node.{uuid.uuid4().hex[:10]}"
    kafka_admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])[
        name
    ].result(timeout=30)
    try:
        producer = Producer({"bootstrap.servers": node_stack.kafka_bootstrap})
        sent = [f"hello-{i}" for i in range(20)]
        for value in sent:
            producer.produce(name, value=value.encode())
        assert producer.flush(30) == 0
        image = node_stack.node.images["runtime"]  # type: ignore[union-attr]
        pod = _pod(
            "reader",
            image,
            ["python3", "-c", READ_TOPIC, node_stack.kafka_bootstrap, name],
            container={
                "resources": {"requests": {"cpu": "100m", "memory": "700Mi"}},
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
            },
            volumes=[{"name": "tmp", "emptyDir": {}}],
        )
        _create(kube, restricted_namespace, pod)
        logs = _wait_succeeded(kube, restricted_namespace, "reader", timeout=300)
        read = sorted(
            line.removeprefix("record: ")
            for line in logs.splitlines()
            if line.startswith("record: ")
        )
        assert read == sorted(sent)
    finally:
        kafka_admin.delete_topics([name])


def test_a_pvc_binds_and_keeps_data_across_pods(
    kube: Kube, node_stack: devstack.StackState, restricted_namespace: str
) -> None:
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}},
    }
    image = node_stack.node.images["runtime"]  # type: ignore[union-attr]
    volume = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}
    mount = {"volumeMounts": [{"name": "data", "mountPath": "/data"}]}
    token = uuid.uuid4().hex
    writer = _pod(
        "writer", image, ["sh", "-c", f"echo {token} > /data/token"], container=mount, **volume
    )
    _create(kube, restricted_namespace, claim, writer)
    _wait_succeeded(kube, restricted_namespace, "writer", timeout=120)
    bound = get(kube, "pvc", "data", restricted_namespace)
    assert bound["status"]["phase"] == "Bound"
    assert bound["spec"]["storageClassName"] == devnode.STORAGE_CLASS
    kube.kubectl("delete", "pod", "writer", "-n", restricted_namespace)
    reader = _pod("reader", image, ["cat", "/data/token"], container=mount, **volume)
    _create(kube, restricted_namespace, reader)
    assert _wait_succeeded(kube, restricted_namespace, "reader", timeout=120).strip() == token


def test_pods_resolve_service_names(
    kube: Kube, node_stack: devstack.StackState, restricted_namespace: str
) -> None:
    image = node_stack.node.images["runtime"]  # type: ignore[union-attr]
    lookup = _pod(
        "lookup",
        image,
        [
            "python3",
            "-c",
            "import socket; print(socket.gethostbyname('kubernetes.default.svc.cluster.local'))",
        ],
    )
    _create(kube, restricted_namespace, lookup)
    service_ip = json.loads(
        kube.kubectl("get", "service", "kubernetes", "-n", "default", "-o", "json").stdout
    )["spec"]["clusterIP"]
    assert _wait_succeeded(kube, restricted_namespace, "lookup", timeout=120).strip() == service_ip


def _mounts() -> list[tuple[int, int, str, str]]:
    """The host's mounts as /proc/self/mountinfo lists them: id, parent id, mount point, and
    the optional fields (propagation)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _ = line.split(" - ", 1)
        mount_id, parent, _, _, point, _, *optional = fields.split()
        found.append((int(mount_id), int(parent), point, " ".join(optional)))
    return found


def test_a_pods_network_namespace_is_pinned_inside_the_netns_mount(
    kube: Kube, node_stack: devstack.StackState, restricted_namespace: str
) -> None:
    """A node added later (`ip netns add` makes /run/netns a mount on first use) must not cover
    the pins of node 1's running pods: covered, containerd cannot remove them and those pods are
    never deleted. So /run/netns is a shared mount of its own, and each pin sits inside it."""
    image = node_stack.node.images["runtime"]  # type: ignore[union-attr]
    _create(kube, restricted_namespace, _pod("pinned", image, ["sleep", "300"]))
    wait_for(
        lambda: _phase(kube, restricted_namespace, "pinned") == "Running",
        timeout=120,
        what="pod pinned Running",
    )
    mounts = _mounts()
    netns = [
        (mount_id, optional) for mount_id, _, point, optional in mounts if point == "/run/netns"
    ]
    assert netns, "/run/netns is no mount of its own"
    top, propagation = netns[-1]  # the last mounted is the one paths resolve through
    assert "shared:" in propagation, propagation
    pins = [
        (point, parent) for _, parent, point, _ in mounts if point.startswith("/run/netns/cni-")
    ]
    assert pins, "no pod network namespace pinned under /run/netns"
    assert all(parent == top for _, parent in pins), pins
    kube.kubectl("delete", "pod", "pinned", "-n", restricted_namespace, "--wait=false")
