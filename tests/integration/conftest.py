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
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import warnings
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import SchemaRegistryClient
from kubernetes.client.exceptions import ApiException

from rillet.driverapi import runspecs
from rillet_devstack import (
    extranoderunning,
    extranodes,
    hostcleanup,
    nodechecking,
    processes,
    provisioning,
    starting,
    tools,
)
from rillet_devstack import node as devnode
from rillet_devstack import stack as devstack
from rillet_devstack.kafka import KafkaCluster
from rillet_devstack.operating import OperatorProcess
from rillet_devstack.schemaregistry import SchemaRegistryState
from tests import conftest as shared

from . import diagnosing, driverpolicy, isolation
from .kubeapi import KubeApi

# Inherited by every process a test starts: one still running at the end is found by it.
os.environ[isolation.SESSION_ENV] = isolation.SESSION

RILLET_PLURALS = ("topics", "tables", "apps")
RILLET_KINDS = ",".join(f"{plural}.rillet.io" for plural in RILLET_PLURALS)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def measurement(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Reports a figure the test measured in the session's summary (shown on success too; it
    travels with the test's report, so it reaches the summary from an xdist worker too)."""

    def report(text: str) -> None:
        request.node.user_properties.append((shared.MEASUREMENT, text))

    return report


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


@dataclass(frozen=True)
class Kube:
    """The stack's Kubernetes API: the stack's kubectl (transient errors retried) for what a test
    checks kubectl for, in-process (`api`, kubeapi.py) for what the tests do many times."""

    kubeconfig: Path
    api: KubeApi = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "api", KubeApi(self.kubeconfig))

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        result = tools.run_kubectl(self.kubeconfig, args, input=input, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    def names(self, kind: str) -> list[str]:
        return [item["metadata"]["name"] for item in self.api.list(kind)]


def _until(probe: Callable[[], bool], *, timeout: float, interval: float = 1.0) -> bool:
    """Poll `probe` until it is true or `timeout` s passed; whether it became true."""
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


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
    _until(lambda: not ours(), timeout=180)
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
    _until(lambda: not ours(), timeout=30)
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


# The fixtures of tests that start pods on the node: the grouped ones, and test_node's own
# (outside the group: their pods are held on node 1, which no test stops).
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


@dataclass
class Owned:
    """The names one test makes on the shared stack: its Kafka prefix and its namespaces."""

    prefix: str
    namespaces: list[str] = field(default_factory=list)

    def owns_topic(self, name: str) -> bool:
        return name.startswith(self.prefix) or any(
            name.startswith(f"{namespace}.") for namespace in self.namespaces
        )


@pytest.fixture
def owned(kafka_admin: AdminClient) -> Iterator[Owned]:
    """The test's names; afterwards its Kafka topics (a Retain topic, one made by hand, one
    named <namespace>.<name>) are deleted, once its namespaces' objects are gone."""
    names = Owned(prefix=f"{isolation.PREFIX}{isolation.new_id()}")
    yield names
    left = [t for t in kafka_admin.list_topics(timeout=30).topics if names.owns_topic(t)]
    if left:
        for future in kafka_admin.delete_topics(left, operation_timeout=30).values():
            try:
                future.result(timeout=60)
            except KafkaException as error:  # already being deleted (by an operator): fine
                if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise
        gone = _until(
            lambda: (
                not any(names.owns_topic(t) for t in kafka_admin.list_topics(timeout=30).topics)
            ),
            timeout=60,
            interval=0.5,
        )
        assert gone, f"Kafka topics of the test not deleted: {left}"


@pytest.fixture
def kafka_prefix(owned: Owned) -> str:
    """The start of every Kafka topic name of the test (`<prefix>.<name>` or `<prefix>-...`)."""
    return owned.prefix


# A name under the test's prefix, from a short one (`unique("clicks")`).
Unique = Callable[[str], str]


@pytest.fixture
def unique(kafka_prefix: str) -> Unique:
    """Object (and Kafka topic) names under the test's prefix."""
    return lambda name: f"{kafka_prefix}-{name}"


@pytest.fixture
def topic_name(owned: Owned) -> str:
    """A Kafka topic name no other test uses."""
    return f"{owned.prefix}.{isolation.new_id()}"


def _rillet_objects(kube: Kube, namespace: str) -> list[str]:
    """The namespace's Topics, Tables and Apps, named as kubectl names them (`topics.rillet.io/x`);
    none without Rillet's CRDs."""
    found = []
    for plural in RILLET_PLURALS:
        try:
            items = kube.api.list(plural, namespace)
        except ApiException as error:
            if error.status != 404:  # 404: the CRDs are not installed (a test's own)
                raise
            items = []
        found += [f"{plural}.rillet.io/{item['metadata']['name']}" for item in items]
    return found


def _delete_rillet_objects(kube: Kube, namespace: str) -> str | None:
    """Delete the namespace's Topics, Tables and Apps, waiting for their finalizers; what went
    wrong (finalizers nobody released, removed here so the namespace can go), or None."""
    # One delete-collection call per kind: `kubectl delete --all` sends a request per object
    # and then waits for each in turn (44 s for a namespace of 200 Topics).
    for plural in RILLET_PLURALS:
        kube.api.delete(plural, namespace=namespace)
    if _until(lambda: not _rillet_objects(kube, namespace), timeout=60, interval=0.2):
        return None
    stuck = _rillet_objects(kube, namespace)
    for name in stuck:
        kube.kubectl(
            "patch",
            name,
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"metadata": {"finalizers": null}}',
            check=False,
        )
    return f"{namespace}: {stuck} not deleted within 60 s"


@pytest.fixture
def new_namespace(
    request: pytest.FixtureRequest, kube: Kube, owned: Owned
) -> Iterator[Callable[..., str]]:
    """Makes fresh namespaces of the test; the session operator watches them if the test uses
    it (or `operated=True`). Afterwards their Rillet objects are deleted (a finalizer left
    unreleased fails the test) and then the namespaces, without waiting for them to go."""
    made: list[str] = []

    def make(*, operated: bool | None = None) -> str:
        if operated is None:
            operated = "operator" in request.fixturenames
        name = f"{isolation.OPERATED if operated else isolation.PREFIX}{isolation.new_id()}"
        kube.api.create_namespace(name, labels=driverpolicy.session_label())
        made.append(name)
        owned.namespaces.append(name)
        return name

    yield make
    problems = [problem for name in made if (problem := _delete_rillet_objects(kube, name))]
    for name in made:
        kube.api.delete("namespace", name)
    if problems:
        pytest.fail("objects left with finalizers: " + "; ".join(problems))


@pytest.fixture
def namespace(new_namespace: Callable[..., str]) -> str:
    """A fresh namespace for the test, removed afterwards."""
    return new_namespace()


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


@pytest.fixture(scope="session")
def crds(kube: Kube) -> None:
    """Rillet's CRDs, installed from crds/ as a user would."""
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    kube.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(REPO / "crds"))


@pytest.fixture(scope="session")
def operator(
    stack: devstack.StackState,
    crds: None,
    kube: Kube,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorProcess]:
    """The operator, watching only the namespaces of tests that use it (t-<session>-op-*),
    resync 3 s; the chart's driver pod policy holds the drivers of this session's namespaces."""
    process = OperatorProcess(
        kubeconfig=stack.kubeconfig,
        bootstrap=stack.kafka_bootstrap,
        namespace_pattern=f"{isolation.OPERATED}*",
        log=tmp_path_factory.mktemp("operator") / "operator.log",
    )
    process.start()
    # Drivers in the tests' namespaces run under the chart's driver pod policy, as installed.
    with driverpolicy.installed(kube, isolation.SESSION):
        yield process
    process.stop()


@pytest.fixture(autouse=True)
def operator_stays_healthy(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that used the session operator fails if the operator died or stopped answering
    its health endpoint meanwhile, with its exit code or stacks and its last log lines; it is
    restarted, so that the tests after it (and this test's own clean-up) have an operator."""
    if "operator" not in request.fixturenames:
        yield
        return
    request.getfixturevalue("new_namespace")  # set up first, so cleaned up after this check
    process: OperatorProcess = request.getfixturevalue("operator")
    yield
    problem = operator_problem(process)
    if problem:
        process.restart()
        pytest.fail(problem)


def operator_problem(process: OperatorProcess) -> str | None:
    """What is wrong with a running operator, with the end of its log; None if nothing."""
    assert process.process is not None
    code = process.process.poll()
    if code is None and process.healthy():
        return None
    if code is None:
        process.dump_stacks()
        _until(lambda: "most recent call first" in process.log_text(), timeout=5, interval=0.2)
        what = "the operator stopped answering its health endpoint"
    else:
        what = f"the operator exited with code {code}"
    tail = "\n".join(process.log_text().splitlines()[-60:])
    return f"{what}; the end of its log:\n{tail}"


@pytest.fixture
def lone_operator(
    stack: devstack.StackState,
    crds: None,
    kube: Kube,
    new_namespace: Callable[..., str],
    tmp_path: Path,
) -> Iterator[Callable[..., OperatorProcess]]:
    """Makes operators of this test alone, each watching one fresh namespace (its
    `namespace_pattern`), not yet started. Afterwards each namespace's Rillet objects are
    deleted while its operator still runs (so it handles their finalizers), then it stops."""
    made: list[OperatorProcess] = []

    def make(**options: Any) -> OperatorProcess:
        process = OperatorProcess(
            kubeconfig=stack.kubeconfig,
            bootstrap=stack.kafka_bootstrap,
            namespace_pattern=new_namespace(operated=False),
            log=tmp_path / f"operator-{len(made)}.log",
            **options,
        )
        made.append(process)
        return process

    yield make
    for process in made:
        if process.process is not None and process.process.poll() is None:
            _delete_rillet_objects(kube, process.namespace_pattern)
        process.stop()


@contextlib.contextmanager
def separate_kafka(root: Path, *, brokers: int = 1) -> Iterator[str]:
    """A KRaft cluster of its own, beside the stack's (which keeps its single broker and its
    state); its bootstrap servers, and it is stopped afterwards."""
    cluster = KafkaCluster(
        libs=provisioning.KAFKA.directory / "libs", root=root, brokers=brokers, heap="384m"
    )
    _, bootstrap = cluster.start()
    try:
        yield bootstrap
    finally:
        cluster.kill_all()


@pytest.fixture(scope="session")
def schema_registry(stack: devstack.StackState) -> SchemaRegistryState:
    if stack.schema_registry is None:
        pytest.fail(
            "the stack runs without its schema registry: `rillet dev up --schema-registry`",
            pytrace=False,
        )
    return stack.schema_registry


@pytest.fixture
def subject_topic(
    kafka_prefix: str, schema_registry: SchemaRegistryState
) -> Iterator[tuple[str, SchemaRegistryClient]]:
    """A topic name of the test's own (no topic is made: serializers need none) and a client;
    the topic's subjects are deleted afterwards, for good."""
    topic = f"{kafka_prefix}-orders"
    with SchemaRegistryClient(schema_registry.client_config()) as client:
        yield topic, client
        for subject in client.get_subjects():
            if subject.startswith(topic):
                client.delete_subject(subject)
                client.delete_subject(subject, permanent=True)


@pytest.fixture
def registry(
    stack: devstack.StackState, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[runspecs.SchemaRegistry, SchemaRegistryClient]]:
    """The stack's registry as a run spec names it (its credentials in the environment, as
    `rillet run` reads them), and a client; the test's subjects are deleted afterwards."""
    state: SchemaRegistryState | None = stack.schema_registry
    if state is None:
        pytest.fail("the stack runs without its schema registry", pytrace=False)
    for name, value in state.environment().items():
        monkeypatch.setenv(name, value)
    with SchemaRegistryClient(state.client_config()) as client:
        before = set(client.get_subjects())
        yield runspecs.SchemaRegistry(url=state.url), client
        for subject in set(client.get_subjects()) - before:
            client.delete_subject(subject)
            client.delete_subject(subject, permanent=True)
