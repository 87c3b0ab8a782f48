"""An operator started before its CRDs exist serves them once they appear, with no restart.

GitOps tools apply the CRDs and the operator's Deployment together, in no fixed order. The
operator waits for Rillet's kinds to be served (answering its health probe meanwhile, so the
Deployment does not restart it), then starts reconciling.

Test plan:
- on an apiserver of the test's own (the stack's serves the CRDs to the whole session): the
  operator starts with no CRDs, answers its probe and says what it waits for; the CRDs are then
  applied, and a Topic applied after them is Ready, and in Kafka, within 30 s, reconciled by the
  same process.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka.admin import AdminClient

from rillet_devstack import controlplane, processes, provisioning
from rillet_devstack import stack as devstack
from rillet_devstack.operating import OperatorProcess

from .conftest import REPO, Kube
from .kafka_reads import wait_kafka_topic_gone
from .objects import apply, wait_condition
from .polling import wait_for


@contextlib.contextmanager
def separate_apiserver(root: Path) -> Iterator[Path]:
    """An etcd and kube-apiserver of their own (no CRDs at all); their kubeconfig."""
    layout = controlplane.ControlPlaneLayout(root)
    etcd, etcd_port = controlplane.start_etcd(provisioning.ETCD.directory / "etcd", layout)
    try:
        apiserver, _, _ = controlplane.start_apiserver(
            provisioning.KUBERNETES.directory / "kube-apiserver", layout, etcd_port=etcd_port
        )
        try:
            yield layout.kubeconfig
        finally:
            processes.stop(apiserver)
    finally:
        processes.stop(etcd)


def test_an_operator_started_before_its_crds_reconciles_once_they_are_applied(
    stack: devstack.StackState,
    kafka_admin: AdminClient,
    kafka_prefix: str,
    tmp_path: Path,
) -> None:
    with separate_apiserver(tmp_path / "control-plane") as kubeconfig:
        kube = Kube(kubeconfig=kubeconfig)
        operator = OperatorProcess(
            kubeconfig=kubeconfig,
            bootstrap=stack.kafka_bootstrap,
            namespace_pattern="default",
            log=tmp_path / "operator.log",
        )
        operator.start()
        name = f"{kafka_prefix}-early"
        try:
            wait_for(
                lambda: "waiting for the CRDs of rillet.io" in operator.log.read_text(),
                timeout=60,
                what="the operator to say it waits for the CRDs",
            )
            assert operator.healthy(), "a waiting operator must answer its probe"
            kube.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
            applied = time.monotonic()
            kube.kubectl("wait", "--for=condition=Established", "--timeout=30s", "crd", "--all")
            apply(
                kube,
                {
                    "apiVersion": "rillet.io/v1alpha1",
                    "kind": "Topic",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"partitions": 2, "deletionPolicy": "Delete"},
                },
            )
            wait_condition(kube, "topic", name, "default", timeout=30)
            took = time.monotonic() - applied
            assert took <= 30, f"Ready {took:.1f} s after the CRDs were applied"
            assert name in kafka_admin.list_topics(name, timeout=10).topics
            assert operator.process is not None
            assert operator.process.poll() is None, "the operator restarted or ended"
            assert operator.healthy()
        finally:
            with contextlib.suppress(AssertionError):
                kube.kubectl("delete", "topic", name, "-n", "default", "--timeout=60s")
            wait_kafka_topic_gone(kafka_admin, name)
            operator.stop()
