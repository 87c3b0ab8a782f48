"""The operator survives what production throws at it.

Test plan:
- SIGKILL in the middle of a 200-topic apply, then a restart: every topic ends exactly as
  declared (checked in Kafka) and every object Ready.
- the only broker stopped for 30 s: KafkaUnavailable shown (and kept while it is down), then
  Ready again, with the change made meanwhile applied, without restarting the operator.
- a broker that refuses topic deletion: the object still goes (finalizer released), the topic
  stays, and a TopicNotDeleted Event says so.
- with namespace prefixing on, the Kafka topic is named <namespace>.<name>.
- with leader election on, a standby stopped by SIGTERM exits cleanly, the Lease untouched; a
  leader stopped by SIGTERM (a rolling update, a drain) exits cleanly and hands its Lease over:
  the standby holds it within 4 s of the signal (kopf alone kept a stopping operator 5 s more)
  and reconciles a Topic applied afterwards.
Each test runs an operator of its own, watching only the test's namespace.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka.admin import AdminClient

from rillet_devstack import provisioning, tools
from rillet_devstack.kafka import KafkaCluster
from rillet_devstack.operating import OperatorProcess

from .conftest import Kube
from .kafka_reads import kafka_overrides, kafka_partitions
from .objects import (
    LEASE,
    apply,
    condition,
    events,
    exists,
    get,
    lease_holder,
    topic,
    wait_condition,
    wait_event,
)
from .polling import wait_for

TOPICS = 200


@pytest.fixture
def own_operator(lone_operator: Callable[..., OperatorProcess]) -> OperatorProcess:
    """The test's operator (not started), watching only `isolated_namespace`."""
    return lone_operator()


@pytest.fixture
def isolated_namespace(own_operator: OperatorProcess) -> str:
    """A namespace no shared operator watches (the test starts its own)."""
    return own_operator.namespace_pattern


def test_sigkill_mid_apply_then_restart_converges(
    kube: Kube,
    isolated_namespace: str,
    own_operator: OperatorProcess,
    kafka_admin: AdminClient,
    kafka_prefix: str,
) -> None:
    prefix = f"{kafka_prefix}-bulk"
    manifests = [
        topic(
            f"{prefix}-{i:03d}",
            isolated_namespace,
            partitions=1 + i % 4,
            config={"retention.ms": 3_600_000 + i},
        )
        for i in range(TOPICS)
    ]
    own_operator.start()
    # The apply runs in the background while the operator works through it.
    kubectl = [str(tools.kubectl()), f"--kubeconfig={kube.kubeconfig}"]
    applying = subprocess.Popen(
        [*kubectl, "apply", "--server-side", "-f", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert applying.stdin is not None
        applying.stdin.write(yaml.safe_dump_all(manifests))
        applying.stdin.close()

        def ready_count() -> int:
            items = kube.api.list("topic", isolated_namespace)
            return sum(condition(item, "Ready").get("status") == "True" for item in items)

        # Kill as soon as Kafka holds the first of the topics (polled cheaply, every 10 ms): the
        # operator is then mid-way through creating topics and writing statuses.
        wait_for(
            lambda: any(t.startswith(prefix) for t in kafka_admin.list_topics(timeout=5).topics),
            timeout=60,
            interval=0.01,
            what="the first topics in Kafka",
        )
        own_operator.kill()
        ready_at_kill = ready_count()
        assert applying.wait(timeout=120) == 0
        assert ready_at_kill < TOPICS, "the kill came too late to interrupt the apply"

        own_operator.start()
        wait_for(lambda: ready_count() == TOPICS, timeout=120, what=f"all {TOPICS} topics Ready")

        metadata = kafka_admin.list_topics(timeout=30).topics
        for i in range(TOPICS):
            name = f"{prefix}-{i:03d}"
            assert len(metadata[name].partitions) == 1 + i % 4, name
        sample = [f"{prefix}-{i:03d}" for i in (0, 57, 199)]
        for name in sample:
            i = int(name.rsplit("-", 1)[1])
            assert kafka_overrides(kafka_admin, name) == {"retention.ms": str(3_600_000 + i)}
    finally:
        if applying.poll() is None:
            applying.kill()
            applying.wait(timeout=30)


@pytest.fixture
def stoppable_kafka(tmp_path: Path) -> Iterator[KafkaCluster]:
    """A broker of its own that refuses topic deletion, so it can be stopped and restarted."""
    cluster = KafkaCluster(
        libs=provisioning.KAFKA.directory / "libs",
        root=tmp_path / "kafka",
        extra_properties={"delete.topic.enable": "false"},
    )
    cluster.start()
    yield cluster
    cluster.kill_all()  # thrown away with its data


def test_broker_down_for_30s_then_back(
    kube: Kube,
    isolated_namespace: str,
    own_operator: OperatorProcess,
    stoppable_kafka: KafkaCluster,
) -> None:
    own_operator.bootstrap = stoppable_kafka.bootstrap
    own_operator.start()
    apply(kube, topic("payments", isolated_namespace, partitions=1))
    wait_condition(kube, "topic", "payments", isolated_namespace)

    stoppable_kafka.stop()
    stopped_at = time.monotonic()
    kube.kubectl(
        "patch",
        "topic",
        "payments",
        "-n",
        isolated_namespace,
        "--type=merge",
        "-p",
        '{"spec": {"partitions": 3}}',
    )
    down = wait_condition(
        kube,
        "topic",
        "payments",
        isolated_namespace,
        status="False",
        reason="KafkaUnavailable",
        timeout=60,
    )
    assert "unreachable" in condition(down, "Ready")["message"]
    assert condition(down, "Reconciling")["status"] == "True"
    assert condition(down, "Stalled")["status"] == "False"

    def still_unavailable_after_30s() -> bool:
        reason = condition(get(kube, "topic", "payments", isolated_namespace), "Ready")["reason"]
        assert reason == "KafkaUnavailable", f"status changed to {reason} while Kafka was down"
        return time.monotonic() - stopped_at >= 30

    wait_for(still_unavailable_after_30s, timeout=60, interval=1, what="30 s of broker outage")
    stoppable_kafka.start()

    wait_condition(kube, "topic", "payments", isolated_namespace, reason="TopicReady", timeout=90)
    admin = AdminClient({"bootstrap.servers": stoppable_kafka.bootstrap})
    assert kafka_partitions(admin, "payments") == 3
    assert own_operator.process is not None
    assert own_operator.process.poll() is None, "the operator restarted or died"
    wait_event(kube, isolated_namespace, "payments", "KafkaUnavailable")


def test_deletion_refused_by_broker_still_releases_the_object(
    kube: Kube,
    isolated_namespace: str,
    own_operator: OperatorProcess,
    stoppable_kafka: KafkaCluster,
) -> None:
    own_operator.bootstrap = stoppable_kafka.bootstrap
    own_operator.start()
    apply(kube, topic("ledger", isolated_namespace, deletionPolicy="Delete"))
    wait_condition(kube, "topic", "ledger", isolated_namespace)

    kube.kubectl("delete", "topic", "ledger", "-n", isolated_namespace, "--timeout=60s")

    assert not exists(kube, "topic", "ledger", isolated_namespace)
    admin = AdminClient({"bootstrap.servers": stoppable_kafka.bootstrap})
    assert kafka_partitions(admin, "ledger") == 1
    refused = wait_for(
        lambda: [
            e
            for e in events(kube, isolated_namespace, "ledger")
            if e["reason"] == "TopicNotDeleted"
        ],
        timeout=20,
        what="a TopicNotDeleted Event",
    )
    assert refused[0]["type"] == "Warning"
    assert "kept" in refused[0]["message"]


def test_namespace_prefix_names_kafka_topics_per_team(
    kube: Kube, isolated_namespace: str, own_operator: OperatorProcess, kafka_admin: AdminClient
) -> None:
    own_operator.settings = {"RILLET_PREFIX_NAMESPACE": "true"}
    own_operator.start()
    apply(kube, topic("invoices", isolated_namespace))
    obj = wait_condition(kube, "topic", "invoices", isolated_namespace)

    assert obj["status"]["topicName"] == f"{isolated_namespace}.invoices"
    assert kafka_partitions(kafka_admin, f"{isolated_namespace}.invoices") == 1


def test_a_leader_stopped_by_sigterm_hands_its_lease_to_the_standby_at_once(
    kube: Kube,
    isolated_namespace: str,
    own_operator: OperatorProcess,
    tmp_path: Path,
    kafka_prefix: str,
    measurement: Callable[[str], None],
) -> None:
    def election(identity: str) -> dict[str, str]:
        return {
            "RILLET_LEADER_ELECTION": "true",
            "RILLET_LEASE_NAME": LEASE,
            "RILLET_LEASE_NAMESPACE": isolated_namespace,
            "RILLET_POD_NAME": identity,
        }

    def replica(identity: str) -> OperatorProcess:
        """Another operator of the namespace, electing its leader with `leader`."""
        return OperatorProcess(
            kubeconfig=leader.kubeconfig,
            bootstrap=leader.bootstrap,
            namespace_pattern=isolated_namespace,
            log=tmp_path / f"{identity}.log",
            settings=election(identity),
        )

    leader = own_operator
    leader.settings = election("leader")
    leader.start()
    wait_for(
        lambda: lease_holder(kube, isolated_namespace) == "leader",
        timeout=60,
        what="the first operator to hold the Lease",
    )
    standby = replica("standby")
    # A standby stopped while it waits exits cleanly and leaves the Lease alone.
    bystander = replica("bystander")
    standby.start()
    try:
        wait_for(
            lambda: "standing by" in standby.log_text(),
            timeout=60,
            what="the second operator standing by",
        )
        bystander.start()
        wait_for(
            lambda: "standing by" in bystander.log_text(),
            timeout=60,
            what="a third operator standing by",
        )
        assert bystander.process is not None
        bystander.process.terminate()
        assert bystander.process.wait(timeout=30) == 0, bystander.log_text()[-2000:]
        assert lease_holder(kube, isolated_namespace) == "leader"

        assert leader.process is not None
        leader.process.terminate()
        signalled = time.monotonic()
        wait_for(
            lambda: lease_holder(kube, isolated_namespace) == "standby",
            timeout=60,
            interval=0.1,
            what="the standby to take the Lease",
        )
        handover = time.monotonic() - signalled
        measurement(f"leader SIGTERMed: the standby held the Lease {handover:.1f} s later")
        assert leader.process.wait(timeout=30) == 0
        assert handover < 4, f"the Lease changed hands {handover:.1f} s after the SIGTERM"

        name = f"{kafka_prefix}-handed-over"
        apply(kube, topic(name, isolated_namespace, deletionPolicy="Delete"))
        wait_condition(kube, "topic", name, isolated_namespace)
        assert "reconcile_topic" in standby.log_text()
    finally:
        # The objects go while an operator still runs (it releases their finalizers).
        kube.kubectl("delete", "topic", "--all", "-n", isolated_namespace, "--timeout=60s")
        standby.stop()
        bystander.stop()
