"""Fixtures of the stack itself: the session's stack (started once, or reused if already
running), its Kubernetes API and Kafka as the tests reach them, its node and the images it runs,
and the check at the end of the session that the tests left nothing on it (`session_leftovers`).
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from rillet_devstack import extranoderunning, extranodes, hostcleanup, starting
from rillet_devstack import stack as devstack
from tests import conftest as shared

from . import isolation
from .kubeapi import Kube
from .polling import until

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def stack() -> Iterator[devstack.StackState]:
    """The stack; one this run started is stopped at its end, and must leave nothing behind
    (no process, mount, bridge, iptables chain, changed sysctl or path of its node; and the
    host, compared with a snapshot taken before its `up`, has nothing new).

    Under xdist the controller starts it before the workers and stops it once every worker is
    done (tests/conftest.py); a worker that finds none running (it stopped meanwhile) starts
    one under a lock, so that the other worker waits and reuses it."""
    with shared.stack_start_lock():
        existing = devstack.running()
        if existing is not None and existing.kafka_security is not None:
            pytest.exit(
                "the running stack's Kafka is on SASL_SSL; the suite's clients speak PLAINTEXT "
                "(its security tests start secured brokers of their own): `rillet dev down` "
                "first",
                returncode=2,
            )
        if existing is not None and not existing.serves(**shared.STACK_PARTS):
            existing = None  # replaced by the suite's (`up` stops it first)
        stops = existing is None and not shared.controller_stops_the_stack()
        before = shared.host_without_a_recorded_stack() if stops else None
        # A reused stack gets the images of the sources as they are (rebuilt only if changed).
        state = (
            starting.with_current_images(existing)
            if existing
            else starting.up(**shared.STACK_PARTS)
        )
    yield state
    if stops:
        left = shared.stop_stack(state, before)
        assert not left, f"`rillet dev down` left behind: {left}"


@pytest.fixture(scope="session")
def session_leftovers(stack: devstack.StackState) -> Iterator[None]:
    """Fails the session if a test left a namespace, Kafka topic, CRD or process behind.

    Names under this session's prefix are its own. A name made by hand (outside any session's
    prefix) is this session's too, unless another test session shared the stack meanwhile: then
    it could be either's, and it is reported without failing."""
    started = time.time()
    isolation.register(started)
    kube = Kube(stack.kubeconfig)
    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})
    topics_before = set(admin.list_topics(timeout=30).topics)
    namespaces_before = set(kube.names("namespaces"))
    yield
    isolation.unregister()
    left = _namespaces_left(kube, namespaces_before) + _topics_left(admin, topics_before)
    ours = [item for item in left if isolation.PREFIX in item]
    unsure = [item for item in left if isolation.PREFIX not in item]
    others = isolation.overlapping(started)
    if unsure and others:
        warnings.warn(
            f"left on the stack, by this session or by {', '.join(others)} that ran meanwhile "
            f"(not failing): {', '.join(unsure)}",
            stacklevel=1,
        )
        unsure = []
    problems = ours + unsure
    problems += [
        f"CRD {name}"
        for name in kube.names("crd")
        if name.split(".", 1)[1].startswith(isolation.PREFIX)
    ]
    problems += _processes_left(stack)
    assert not problems, "the tests left behind:\n" + "\n".join(problems)


def _namespaces_left(kube: Kube, before: set[str]) -> list[str]:
    def ours() -> list[str]:
        return [
            name
            for name in kube.names("namespaces")
            if isolation.is_test_namespace(name) and name not in before
        ]

    # Deleting a namespace takes the controller-manager a few seconds (longer with pods).
    until(lambda: not ours(), timeout=180)
    left = []
    for name in ours():
        status = (kube.api.read("namespace", name) or {}).get("status", {})
        # What holds a Terminating namespace: its conditions name the objects and finalizers.
        holding = [
            f"{c.get('type')}: {c.get('message')}"
            for c in status.get("conditions", [])
            if c.get("status") == "True"
        ]
        left.append(f"namespace {name} ({status.get('phase')}; {'; '.join(holding)})")
    return left


def _topics_left(admin: AdminClient, before: set[str]) -> list[str]:
    def ours() -> set[str]:
        return {
            name
            for name in admin.list_topics(timeout=30).topics
            if name not in before
            and not isolation.stack_owned_topic(name)
            and not isolation.foreign(name)
        }

    # A topic being deleted (by an operator, after its object went) is given some time.
    until(lambda: not ours(), timeout=30)
    return [f"Kafka topic {name}" for name in sorted(ours())]


def _processes_left(stack: devstack.StackState) -> list[str]:
    # A stack this session started carries the marker too: its processes are not the tests'.
    found = isolation.session_processes(exclude_sessions={p.pid for p in stack.processes})
    keep = {pid for pid in [isolation.spark_gateway_pid()] if pid is not None}
    if stack.node is not None:
        keep |= set(hostcleanup.processes_mentioning(str(stack.node.containerd_socket)))
    # An extra node a test started (`rillet dev node start`) is the stack's: all of it is in
    # its cgroup.
    for index in range(2, extranodes.MAX_NODES + 1):
        keep |= set(extranoderunning.cgroup_pids(extranodes.extra_node(index)))
    left = isolation.without_descendants_of(found, keep)
    isolation.kill(left)
    return [f"process {p.pid} (parent {p.ppid}): {p.command[:200]}" for p in left]


@pytest.fixture(scope="session")
def kube(stack: devstack.StackState, session_leftovers: None) -> Kube:
    os.environ["KUBECONFIG"] = str(stack.kubeconfig)
    return Kube(kubeconfig=stack.kubeconfig)


@pytest.fixture(scope="session")
def kafka_bootstrap(stack: devstack.StackState, session_leftovers: None) -> str:
    return stack.kafka_bootstrap


@pytest.fixture(scope="session")
def kafka_admin(kafka_bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


@pytest.fixture(scope="session")
def runtime_image(stack: devstack.StackState) -> str:
    """The stack's runtime image, which App drivers and executors run on its node."""
    if stack.node is None or "runtime" not in stack.node.images:
        pytest.fail("the stack runs without a node (`rillet dev up --no-node`); this test needs it")
    return stack.node.images["runtime"]


@pytest.fixture(scope="session")
def operator_image(stack: devstack.StackState) -> str:
    """The stack's operator image (repository:tag), which the chart runs on its node."""
    if stack.node is None or "operator" not in stack.node.images:
        pytest.fail("the stack runs without a node (`rillet dev up --no-node`); this test needs it")
    return stack.node.images["operator"]


@pytest.fixture(scope="module")
def node_stack(stack: devstack.StackState) -> devstack.StackState:
    if stack.node is None:
        pytest.fail(
            "the stack runs without a node (`rillet dev up --no-node`); these tests need it"
        )
    return stack
