"""The stack's worker node runs Rillet's operator image as the chart installs it.

Test plan:
- `helm install` of the chart with the locally built operator image gives an Available
  Deployment, and that pod (with the chart's ServiceAccount, nothing else watching the
  namespace) reconciles a Topic to Ready in Kafka; it is admitted and runs in a namespace that
  enforces the `restricted` Pod Security level;
- the chart's two replicas elect a leader by Lease: only it reconciles, the other stands by
  (`rillet_leader` 1 on the leader's metrics, 0 on the standby's). The leader's pod is lost as on
  a node crash (process SIGKILLed, no chance to release the Lease; pod force-deleted) and a
  Topic changed at once: another replica takes the Lease over and the change is in Kafka within
  15 s, applied once (one Event). The standby and the Deployment's replacement pod both wait the
  Lease out and either may win; the other stands by. `helm upgrade` then rolls both pods and the
  new ones reconcile.
Every pod here runs on node 1 (the chart's `nodeSelector` value): these tests are not in the
node's xdist group, and that group's tests stop node 2 as a crash would.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka.admin import AdminClient

from rillet_devstack import installs
from rillet_devstack import node as devnode
from rillet_devstack import stack as devstack

from .conftest import Kube
from .helmcharts import CHART, helm
from .kafka_reads import kafka_overrides, wait_kafka_topic_gone
from .objects import LEASE, apply, events, get, lease_holder, topic, wait_condition
from .podlogs import pod_log
from .polling import wait_for
from .scraping import value


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
                in (log := pod_log(kube, restricted_namespace, operator_pod))
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
        after = pod_log(kube, restricted_namespace, operator_pod)
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
        standby_log = pod_log(kube, restricted_namespace, standby)
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
                if f"held by {holder}" in (log := pod_log(kube, restricted_namespace, follower))
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
