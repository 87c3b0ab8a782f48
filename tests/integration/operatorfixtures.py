"""Fixtures of Rillet's CRDs and operators: the session's operator (watching the namespaces of
the tests that use it, and checked healthy after each of them), and operators of a test alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rillet_devstack import stack as devstack
from rillet_devstack.operating import OperatorProcess

from . import driverpolicy, isolation
from .kubeapi import Kube
from .namespacefixtures import delete_rillet_objects
from .polling import until
from .stackfixtures import REPO


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
        until(lambda: "most recent call first" in process.log_text(), timeout=5, interval=0.2)
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
            delete_rillet_objects(kube, process.namespace_pattern)
        process.stop()
