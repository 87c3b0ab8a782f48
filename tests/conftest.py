"""Shared test configuration: every test is marked unit or integration by its folder; the tests
that run pods on the stack's node share one xdist group (they run one after another); and, when
the suite runs on xdist workers, the controller starts the stack (unless one fit runs) before the
workers start, and stops it once every worker is done (a worker could not: the others still
use it).

Figures that tests measure travel in their reports' user properties, and are printed at the end
of the run by whichever process prints its summary (the controller's, under xdist).

The Spark JVMs the tests start (local sessions, `rillet run` drivers) compile with C1 only: a
test's Spark runs for seconds, where HotSpot's C2 compiles for longer than it saves. Measured on
the recovery and word-count tests, 2 cores, alternated: 134 CPU-seconds against 196 to 210, and
95 to 105 s against 121 to 130. Most node tests give their Apps the same flag
(wordcounts.C1_ONLY); the benchmarks keep HotSpot's defaults and Rillet's JVM flags.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest

from rillet_devstack import stack as devstack
from rillet_devstack import stopping
from tests import hostsnapshot


class StackParts(TypedDict):
    """What `rillet dev up` starts beside Kafka and the node (its keywords)."""

    object_store: bool
    schema_registry: bool


TESTS = Path(__file__).parent
MEASUREMENT = "measurement"
# The fixtures of tests that run pods on the node. Those tests run one at a time (one xdist
# group): what they time (scaling on lag, a driver's restart) is measured against the node's two
# cores, which a second test's Apps would share.
NODE_FIXTURES = {"runtime_image", "operator_image"}
# What the tests' stack runs beside Kafka and the node (`make test-repeat` starts the same).
STACK_PARTS = StackParts(object_store=True, schema_registry=True)
STACK_FLAGS = tuple(f"--{part.replace('_', '-')}" for part in STACK_PARTS)
# Set by an xdist controller that found no stack running, for its workers (which inherit it).
_CONTROLLER_STOPS = "RILLET_TEST_CONTROLLER_STOPS_STACK"
# The host as that controller found it, before its `rillet dev up`.
_HOST_BEFORE = pytest.StashKey[hostsnapshot.Snapshot]()
# What `rillet dev down` left behind, said again as the run's last line (CI shows the end).
_STACK_LEFT = pytest.StashKey[str]()
# pyspark's launcher puts these in the command of each driver JVM it starts (a test session's,
# a `rillet run`'s), beside Rillet's and the App's own options. Unless the caller set its own.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")


# First: xdist's own hook, which names each test's group from its xdist_group marks, must find
# the marks given here. (Without tryfirst it ran before this one, and the node's tests went to
# both workers.)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = Path(str(item.fspath)).relative_to(TESTS).parts[0]
        if folder in ("unit", "integration"):
            item.add_marker(getattr(pytest.mark, folder))
        if _runs_on_node(item):
            item.add_marker(pytest.mark.xdist_group("node"))


def _runs_on_node(item: pytest.Item) -> bool:
    return bool(NODE_FIXTURES & set(getattr(item, "fixturenames", ())))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """On an xdist worker (`--dist loadgroup`), a test that runs pods on the node must carry its
    group in its id: that is how xdist keeps those tests on one worker. With a pytest xdist
    cannot group with (9.2: pytest-xdist issue #1386) they would run at once, silently."""
    grouped = item.nodeid.endswith("@node")
    if getattr(item.config.option, "loadgroup", False) and _runs_on_node(item) and not grouped:
        pytest.fail(
            "xdist did not put this test in the node's group (its id has no @node), so the "
            "node's tests would run at once on several workers: is pytest at a version "
            "pyproject.toml allows?",
            pytrace=False,
        )


@contextlib.contextmanager
def stack_start_lock() -> Iterator[None]:
    """Held while a test process finds or starts the stack: two xdist workers never both start
    one. (A file of its own: `rillet dev up` empties the stack's state directory.)"""
    with open(Path(tempfile.gettempdir()) / "rillet-test-stack-start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def controller_stops_the_stack() -> bool:
    return os.environ.get(_CONTROLLER_STOPS) == "1"


def stop_stack(
    state: devstack.StackState, before: hostsnapshot.Snapshot | None = None
) -> list[str]:
    """`rillet dev down`; what it left behind (nothing, when it cleaned up fully): by its own
    lists, and, given the host as it was before `up`, by the host's (tests/hostsnapshot.py)."""
    stopping.down()
    left = devstack.leftovers(state)
    if before is not None:
        left += hostsnapshot.left_behind_since(before, hostsnapshot.StackScope.of(state))
    return left


def host_without_a_recorded_stack() -> hostsnapshot.Snapshot:
    """The host as it is with no stack: one recorded (a part of it ended, or it lacks what the
    suite needs, as a `make demo` stack does) is stopped first, as `rillet dev up` would stop it.
    Read with that stack still on it, the host showed its changes (kubelet's sysctls), which its
    `down`, restoring them, then seemed to leave behind."""
    if devstack.load() is not None:
        print("a stack is recorded that the tests cannot use as it is: `rillet dev down` first")
        stopping.down()
    return hostsnapshot.take()


def _is_xdist_controller(config: pytest.Config) -> bool:
    return config.pluginmanager.has_plugin("dsession")


def _runs_integration_tests(config: pytest.Config) -> bool:
    if config.option.markexpr.strip() == "unit":
        return False
    paths = [Path(arg.split("::")[0]).resolve() for arg in config.args]
    return any(not path.is_relative_to(TESTS / "unit") for path in paths)


def pytest_sessionstart(session: pytest.Session) -> None:
    """An xdist controller starts the stack its integration tests need (unless one that has
    what they need runs), showing each step as `rillet dev up` does (a cold machine builds for
    many minutes), and stops it at the end.
    It runs before xdist starts its workers (xdist's own hook is trylast): they find the stack
    running, and inherit the variable that tells them not to stop it."""
    config = session.config
    if not _is_xdist_controller(config) or not _runs_integration_tests(config):
        return
    running = devstack.running()
    if running is not None and running.serves(**STACK_PARTS):
        return
    os.environ[_CONTROLLER_STOPS] = "1"
    capture = config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        config.stash[_HOST_BEFORE] = host_without_a_recorded_stack()
        # With the object store and the schema registry: the tests of checkpoints on S3 and of
        # registry formats need them (`make demo`'s stack has neither).
        up = [sys.executable, "-m", "rillet.cli", "dev", "up", *STACK_FLAGS]
        started = subprocess.run(up, check=False)
    if started.returncode != 0:
        pytest.exit("`rillet dev up` failed (above)", returncode=pytest.ExitCode.INTERNAL_ERROR)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not (_is_xdist_controller(session.config) and controller_stops_the_stack()):
        return
    state = devstack.load()
    if state is None:  # its `rillet dev up` failed before recording one
        return
    left = stop_stack(state, session.config.stash.get(_HOST_BEFORE, None))
    if left:
        message = f"`rillet dev down` left behind: {left}"
        session.config.get_terminal_writer().line(message, red=True)
        session.config.stash[_STACK_LEFT] = message
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    """The session failed after its tests passed: say why below the summary, where a CI log's
    tail (all some CI pages show) has it."""
    message = config.stash.get(_STACK_LEFT, None)
    if message:
        print(f"\nthe run failed after its tests: {message}", file=sys.stderr)


@pytest.hookimpl(trylast=True)  # after the slowest durations: near the end a CI page shows
def pytest_terminal_summary(terminalreporter: Any) -> None:
    lines = [
        f"{report.nodeid}: {text}"
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for name, text in getattr(report, "user_properties", ())
        if name == MEASUREMENT
    ]
    if lines:
        terminalreporter.write_sep("-", "measurements and notes")
        for line in lines:
            terminalreporter.write_line(line)
    if busy := _busy_workers(terminalreporter.stats.values()):
        terminalreporter.write_line(f"seconds in tests per xdist worker: {busy}")


def _busy_workers(stats: Iterable[list[Any]]) -> str:
    """Each xdist worker's seconds in its tests' setup, call and teardown, and how many were the
    node group's: the run lasts as long as its busiest worker (what to shorten next)."""
    total: Counter[str] = Counter()
    grouped: Counter[str] = Counter()
    for reports in stats:
        for report in reports:
            worker = getattr(getattr(report, "node", None), "gateway", None)
            if worker is None or getattr(report, "when", None) is None:
                continue
            total[worker.id] += report.duration
            if report.nodeid.endswith("@node"):
                grouped[worker.id] += report.duration
    return "; ".join(
        f"{worker} {total[worker]:.0f} s ({grouped[worker]:.0f} s in the node group)"
        for worker in sorted(total)
    )
