"""The stack's worker node runs what users run: Rillet's own images, as pods.

Test plan:
- the node is Ready, and a pod of the runtime image reads a topic of the stack's broker through
  Spark's Kafka connector over the pod network: `kubectl logs` shows the records;
- `helm install` of the chart with the locally built operator image gives an Available
  Deployment, and that pod (with the chart's ServiceAccount, nothing else watching the
  namespace) reconciles a Topic to Ready in Kafka;
- both pods are admitted and run in namespaces that enforce the `restricted` Pod Security level;
- the chart's two replicas elect a leader by Lease: only it reconciles, the other stands by
  (`rillet_leader` 1 on the leader's metrics, 0 on the standby's). The leader's pod is lost as on
  a node crash (process SIGKILLed, no chance to release the Lease; pod force-deleted) and a
  Topic changed at once: another replica takes the Lease over and the change is in Kafka within
  15 s, applied once (one Event). The standby and the Deployment's replacement pod both wait the
  Lease out and either may win; the other stands by. `helm upgrade` then rolls both pods and the
  new ones reconcile;
- a PVC of the default StorageClass binds, and data written by one pod is read back by the next;
- cluster DNS resolves Service names from pods;
- a pod's network namespace is pinned inside /run/netns, a shared mount of its own, so a node
  added later (`ip netns add`) cannot cover the pin and wedge the pod's deletion.
Every pod here runs on node 1 (a nodeSelector; the chart's `nodeSelector` value): these tests
are not in the node's xdist group, and that group's tests stop node 2 as a crash would.
(That `rillet dev down` leaves nothing behind is checked when the session's stack goes down:
see the `stack` fixture.)
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from rillet_devstack import installs
from rillet_devstack import node as devnode
from rillet_devstack import stack as devstack

from .conftest import Kube
from .helmcharts import CHART, helm
from .kafka_reads import kafka_overrides, wait_kafka_topic_gone
from .objects import LEASE, apply, events, get, lease_holder, topic, wait_condition
from .polling import wait_for
from .scraping import value

RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}
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


@pytest.fixture(scope="module")
def node_stack(stack: devstack.StackState) -> devstack.StackState:
    if stack.node is None:
        pytest.fail(
            "the stack runs without a node (`rillet dev up --no-node`); these tests need it"
        )
    return stack


@pytest.fixture
def restricted_namespace(kube: Kube) -> Iterator[str]:
    """A fresh namespace that enforces Pod Security `restricted`."""
    name = f"r-{uuid.uuid4().hex[:10]}"
    kube.kubectl("create", "namespace", name)
    labels = [f"{key}={value}" for key, value in RESTRICTED.items()]
    kube.kubectl("label", "namespace", name, *labels)
    yield name
    kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


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


def _log(kube: Kube, namespace: str, pod: str) -> str:
    return kube.kubectl("logs", "-n", namespace, pod).stdout


def _wait_succeeded(kube: Kube, namespace: str, pod: str, *, timeout: float) -> str:
    """Wait until the pod ends; fail with its logs unless it succeeded; return its logs."""
    phase = wait_for(
        lambda: p if (p := _phase(kube, namespace, pod)) in ("Succeeded", "Failed") else None,
        timeout=timeout,
        interval=1,
        what=f"pod {namespace}/{pod} to finish",
    )
    logs = _log(kube, namespace, pod)
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


def _install_local_chart(
    kube: Kube, state: devstack.StackState, namespace: str, watched: str, *values: str
) -> None:
    """`helm install` the chart with the operator image the stack built, watching `watched`."""
    local = installs.local_operator_values(
        operator_image=state.node.images["operator"],  # type: ignore[union-attr]
        kafka_bootstrap=state.kafka_bootstrap,
        watched=watched,
    )
    # Helm's --set reads dots as nesting: the label's own dots are escaped.
    on_node_1 = rf"nodeSelector.kubernetes\.io/hostname={devnode.NODE_NAME}"
    sets = [f"--set={value}" for value in (on_node_1, *values)]
    helm(
        kube,
        "install",
        "rillet",
        str(CHART),
        "--namespace",
        namespace,
        *local,
        *sets,
        "--wait",
        "--timeout=240s",
    )


def test_the_chart_runs_the_operator_image_which_reconciles_topics(
    kube: Kube,
    node_stack: devstack.StackState,
    crds: None,
    restricted_namespace: str,
    kafka_admin: AdminClient,
) -> None:
    watched = f"w-{uuid.uuid4().hex[:10]}"
    kube.kubectl("create", "namespace", watched)
    _install_local_chart(kube, node_stack, restricted_namespace, watched, "replicas=1")
    try:
        deployment = get(kube, "deployment", "rillet-operator", restricted_namespace)
        available = {c["type"]: c["status"] for c in deployment["status"]["conditions"]}
        assert available["Available"] == "True"
        pods = kube.api.list("pod", restricted_namespace)
        assert [p["status"]["phase"] for p in pods] == ["Running"]
        assert pods[0]["spec"]["serviceAccountName"] == "rillet-operator"

        operator_pod = pods[0]["metadata"]["name"]
        # Ready as soon as it answers its probe, which it does while it takes the Lease too: the
        # start-up line follows within seconds. It watches exactly this namespace.
        before = wait_for(
            lambda: (
                log
                if f"namespaces {watched}"
                in (log := _log(kube, restricted_namespace, operator_pod))
                else None
            ),
            timeout=60,
            what="the operator pod to start reconciling",
        )
        assert "reconcile_topic" not in before
        name = f"pod-made-{uuid.uuid4().hex[:8]}"
        apply(kube, topic(name, watched, partitions=3, deletionPolicy="Delete"))
        wait_condition(kube, "topic", name, watched, timeout=120)
        described = kafka_admin.list_topics(name, timeout=10).topics[name]
        assert described.error is None
        assert len(described.partitions) == 3
        # Nothing but the pod watches this namespace: it reconciled the Topic, and says so.
        after = _log(kube, restricted_namespace, operator_pod)
        assert "Handler 'reconcile_topic' succeeded" in after
        kube.kubectl("delete", "topic", name, "-n", watched, "--timeout=60s")
        wait_kafka_topic_gone(kafka_admin, name)
    finally:
        helm(kube, "uninstall", "rillet", "--namespace", restricted_namespace, "--wait")
        kube.kubectl("delete", "namespace", watched, "--wait=false", check=False)


def _ready_pods(kube: Kube, namespace: str) -> list[str]:
    pods = kube.api.list("pod", namespace)
    return sorted(
        pod["metadata"]["name"]
        for pod in pods
        if "deletionTimestamp" not in pod["metadata"]
        and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in pod.get("status", {}).get("conditions", [])
        )
    )


def _operator_process(pod: str) -> int:
    """The host pid of the operator process of `pod` (the Python under tini): the node runs on
    this machine, so its containers' processes are ours to signal, as the kernel's OOM killer
    would."""
    marker = f"RILLET_POD_NAME={pod}".encode()
    for proc in Path("/proc").iterdir():
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            program = (proc / "cmdline").read_bytes().split(b"\0")[0]
        except OSError:  # not a process, or one that just ended
            continue
        if marker in environ and not program.endswith(b"tini"):
            return int(proc.name)
    raise AssertionError(f"no operator process of pod {pod} on this host")


def _leading(kube: Kube, namespace: str, pod: str) -> float:
    """`rillet_leader` as the pod serves it, scraped over the pod network as Prometheus would."""
    ip = get(kube, "pod", pod, namespace)["status"]["podIP"]
    return value(httpx.get(f"http://{ip}:8080/metrics", timeout=10).text, "rillet_leader")


def _config_changes(kube: Kube, namespace: str, name: str) -> list[dict[str, Any]]:
    return [e for e in events(kube, namespace, name) if e["reason"] == "ConfigChanged"]


def test_two_replicas_fail_over_within_15_s_and_apply_a_change_made_meanwhile_once(
    kube: Kube,
    node_stack: devstack.StackState,
    crds: None,
    restricted_namespace: str,
    kafka_admin: AdminClient,
    measurement: Callable[[str], None],
) -> None:
    watched = f"w-{uuid.uuid4().hex[:10]}"
    kube.kubectl("create", "namespace", watched)
    _install_local_chart(kube, node_stack, restricted_namespace, watched)  # replicas: 2
    name = f"ha-{uuid.uuid4().hex[:8]}"
    try:
        pods = wait_for(
            lambda: ready if len(ready := _ready_pods(kube, restricted_namespace)) == 2 else None,
            timeout=120,
            what="both operator replicas Ready",
        )
        leader = wait_for(
            lambda: holder if (holder := lease_holder(kube, restricted_namespace)) else None,
            timeout=60,
            what="a replica to take the Lease",
        )
        assert leader in pods
        # The chart's nodeSelector placed both.
        assert {
            get(kube, "pod", pod, restricted_namespace)["spec"]["nodeName"] for pod in pods
        } == {devnode.NODE_NAME}
        [standby] = [pod for pod in pods if pod != leader]
        apply(kube, topic(name, watched, deletionPolicy="Delete", config={"retention.ms": 3600000}))
        wait_condition(kube, "topic", name, watched, timeout=120)
        standby_log = _log(kube, restricted_namespace, standby)
        assert f"standing by: lease {restricted_namespace}/{LEASE} held by {leader}" in standby_log
        assert "reconcile_topic" not in standby_log  # only the leader reconciles
        # Both are scrape targets that are up; the metric tells which one leads.
        assert _leading(kube, restricted_namespace, leader) == 1
        assert _leading(kube, restricted_namespace, standby) == 0

        # The leader's pod is lost as on a node crash: its process SIGKILLed (no chance to
        # release the Lease) and the pod force-deleted, so no restarted container of the same
        # pod (same identity) can reclaim it: the standby must wait the Lease out.
        os.kill(_operator_process(leader), signal.SIGKILL)
        killed = time.monotonic()
        kube.kubectl(
            "delete",
            "pod",
            leader,
            "-n",
            restricted_namespace,
            "--grace-period=0",
            "--force",
            "--wait=false",
        )
        apply(kube, topic(name, watched, deletionPolicy="Delete", config={"retention.ms": 7200000}))
        wait_for(
            lambda: kafka_overrides(kafka_admin, name).get("retention.ms") == "7200000",
            timeout=60,
            interval=0.2,
            what="the other replica to apply the change",
        )
        failover = time.monotonic() - killed
        measurement(
            f"leader pod killed: the change made meanwhile was in Kafka {failover:.1f} s later"
        )
        holder = lease_holder(kube, restricted_namespace)
        assert holder != leader, "the killed leader's Lease was not taken over"
        assert failover <= 15, f"failover took {failover:.1f} s"

        # Exactly once: one ConfigChanged Event, and the Topic caught up with no second write;
        # the Deployment's replacement pod stands by, as the Lease is held.
        obj = wait_condition(kube, "topic", name, watched, timeout=60)
        assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
        [replacement] = wait_for(
            lambda: (
                [p for p in ready if p not in pods]
                if len(ready := _ready_pods(kube, restricted_namespace)) == 2
                else None
            ),
            timeout=120,
            what="a replacement replica Ready, as a standby",
        )
        changes = _config_changes(kube, watched, name)
        assert [e.get("count", 1) for e in changes] == [1], changes
        # The standby and the Deployment's replacement both wait the Lease out, and either may
        # take it: one leads, the other stands by.
        assert holder in (standby, replacement)
        follower = replacement if holder == standby else standby
        # A standby reads the Lease once a second and logs each new holder: one that started
        # while the killed leader still held it names the new holder at its next read.
        follower_log = wait_for(
            lambda: (
                log
                if f"held by {holder}" in (log := _log(kube, restricted_namespace, follower))
                else None
            ),
            timeout=15,
            interval=0.5,
            what=f"the follower {follower} to log the Lease held by {holder}",
        )
        assert "reconcile_topic" not in follower_log
        pods = [standby, replacement]

        # An upgrade rolls both pods; each old leader releases the Lease as it stops, and the
        # release reconciles afterwards.
        helm(
            kube,
            "upgrade",
            "rillet",
            str(CHART),
            "--namespace",
            restricted_namespace,
            "--reuse-values",
            "--set",
            "operator.resyncSeconds=20",
            "--wait",
            "--timeout=240s",
        )
        rolled = wait_for(
            lambda: r if len(r := _ready_pods(kube, restricted_namespace)) == 2 else None,
            timeout=120,
            what="the upgraded replicas Ready",
        )
        assert not set(rolled) & set(pods)
        apply(
            kube, topic(name, watched, deletionPolicy="Delete", config={"retention.ms": 10800000})
        )
        wait_for(
            lambda: kafka_overrides(kafka_admin, name).get("retention.ms") == "10800000",
            timeout=60,
            what="the upgraded release to apply a change",
        )
        assert lease_holder(kube, restricted_namespace) in rolled
    finally:
        try:
            kube.kubectl("delete", "topic", name, "-n", watched, "--timeout=60s", check=False)
            wait_kafka_topic_gone(kafka_admin, name)
        finally:
            helm(kube, "uninstall", "rillet", "--namespace", restricted_namespace, "--wait")
            kube.kubectl("delete", "namespace", watched, "--wait=false", check=False)


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
