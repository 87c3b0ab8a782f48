"""Integration fixtures: the real local stack (started once, or reused if already running).

A stack this session started is stopped at the end; one that was already running is left as it
was, so a developer's `rillet dev up` survives a test run.

Isolation (names in isolation.py): every namespace and Kafka topic a test makes starts with the
session's prefix and an id of the test's own. The fixtures that make them also remove them: a
test's Rillet objects first (while an operator still handles their finalizers; one left
unreleased fails the test), then its namespaces and its Kafka topics. `session_leftovers` fails
the session if anything is left at its end: a namespace or a Kafka topic of the session, any
other namespace named as tests name them (t-<hex>...) or Kafka topic that appeared during the
session and that the stack does not own (another session's, under its own prefix, excepted), a
test's CRD, or a process a test started.

The fixtures live in modules by what they set up, imported here (pytest takes a conftest's
fixtures from its namespace; only the root conftest may name plugin modules): stackfixtures.py
(the stack, its API and Kafka, its node's images, `session_leftovers`), namespacefixtures.py
(a test's names and namespaces), operatorfixtures.py (the CRDs and operators) and
kafkafixtures.py (Kafka clusters of a test's own, the schema registry). What stays here is what
watches the tests that start pods on the node: the node's check around each of them, and the
cluster's story added to the report of one that failed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from datetime import UTC, datetime

import pytest

from rillet_devstack import node as devnode
from rillet_devstack import nodechecking, processes
from rillet_devstack import stack as devstack
from tests import conftest as shared

from . import diagnosing, isolation

# The fixtures (and what test modules import from here: Kube, REPO, RILLET_KINDS, Unique,
# separate_kafka), each a name of this module so that pytest and those modules find it.
from .kafkafixtures import node_secured_kafka as node_secured_kafka
from .kafkafixtures import registry as registry
from .kafkafixtures import schema_registry as schema_registry
from .kafkafixtures import separate_kafka as separate_kafka
from .kafkafixtures import subject_topic as subject_topic
from .kubeapi import Kube as Kube
from .namespacefixtures import RILLET_KINDS as RILLET_KINDS
from .namespacefixtures import Unique as Unique
from .namespacefixtures import kafka_prefix as kafka_prefix
from .namespacefixtures import namespace as namespace
from .namespacefixtures import new_namespace as new_namespace
from .namespacefixtures import owned as owned
from .namespacefixtures import restricted_namespace as restricted_namespace
from .namespacefixtures import topic_name as topic_name
from .namespacefixtures import unique as unique
from .operatorfixtures import crds as crds
from .operatorfixtures import lone_operator as lone_operator
from .operatorfixtures import operator as operator
from .operatorfixtures import operator_stays_healthy as operator_stays_healthy
from .stackfixtures import REPO as REPO
from .stackfixtures import kafka_admin as kafka_admin
from .stackfixtures import kafka_bootstrap as kafka_bootstrap
from .stackfixtures import kube as kube
from .stackfixtures import node_stack as node_stack
from .stackfixtures import operator_image as operator_image
from .stackfixtures import runtime_image as runtime_image
from .stackfixtures import session_leftovers as session_leftovers
from .stackfixtures import stack as stack

# Inherited by every process a test starts: one still running at the end is found by it.
os.environ[isolation.SESSION_ENV] = isolation.SESSION


@pytest.fixture
def measurement(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Reports a figure the test measured in the session's summary (shown on success too; it
    travels with the test's report, so it reaches the summary from an xdist worker too)."""

    def report(text: str) -> None:
        request.node.user_properties.append((shared.MEASUREMENT, text))

    return report


# The fixtures of tests that start pods on the node: the grouped ones, and node_stack (of
# test_node.py and test_node_chart.py, outside the group: their pods are held on node 1, which
# no test stops).
_POD_FIXTURES = shared.NODE_FIXTURES | {"node_stack"}
# A test's call report, for its fixtures' teardown to see whether it failed.
_CALL_REPORT = pytest.StashKey[pytest.TestReport]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[_CALL_REPORT] = report
    if report.failed and _POD_FIXTURES & set(getattr(item, "fixturenames", ())):
        funcargs = getattr(item, "funcargs", {})
        if (stack := funcargs.get("stack")) is not None:
            kube = funcargs.get("kube") or Kube(kubeconfig=stack.kubeconfig)
            story = diagnosing.cluster_story(kube, stack.kafka_bootstrap)
            report.sections.append(("the cluster when it failed", story))
    return report


def _why_pods_wait(kube: Kube, stack: devstack.StackState) -> list[str]:
    """What keeps the stack's node from running a test's pods: an exited stack process (the
    scheduler, the kubelet, ...), a pressure condition or taint of the node, and Pending pods
    that a stuck scheduler or kubelet left unattended."""
    exited = [
        f"{p.name} (pid {p.pid}) has exited, see {p.log}"
        for p in stack.processes
        if not processes.is_alive(p)
    ]
    found = kube.api.read("node", devnode.NODE_NAME)
    node = nodechecking.why_pods_wait(found) if found else ["the node is not registered"]
    pending = kube.api.list("pod", fields="status.phase=Pending")
    if unattended := nodechecking.unattended_pods(pending, now=datetime.now(UTC)):
        node.append(f"pods waiting over a minute for: {', '.join(unattended)}")
    return exited + node


@pytest.fixture(autouse=True)
def _node_takes_pods(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that starts pods on the node fails at once, saying why, when the node takes none;
    and one that failed is followed by the same check, which names what broke meanwhile.
    Without it, each such test waited minutes for pods that stayed Pending: a CI run spent 40
    minutes on 15 tests and printed no reason."""
    if not _POD_FIXTURES & set(request.fixturenames):
        yield
        return
    kube: Kube = request.getfixturevalue("kube")
    stack: devstack.StackState = request.getfixturevalue("stack")
    if reasons := _why_pods_wait(kube, stack):
        pytest.fail(f"the stack's node takes no pods: {'; '.join(reasons)}", pytrace=False)
    yield
    call = request.node.stash.get(_CALL_REPORT, None)
    if call is not None and call.failed and (reasons := _why_pods_wait(kube, stack)):
        pytest.fail(f"the stack's node now takes no pods: {'; '.join(reasons)}", pytrace=False)
