"""A leader that misses its renewals is replaced, and never writes again once it wakes.

Test plan (one scenario, two operator processes of the test's namespace, leader election on):
- The leader is frozen (SIGSTOP) the moment the apiserver shows one of its renewals: it stops
  renewing without dying, as on a paused VM or a starved node. A change made to a Topic
  meanwhile reaches Kafka through the standby, which takes the Lease no sooner than the lease
  duration after the last renewal (client-go's rule) and within the bound the lease settings
  give; the whole takeover, to the change in Kafka, within the 15 s the README promises.
- Then the old leader is woken (SIGCONT) while the new one is frozen, right after a second
  change: any write the apiserver accepts, and any change in Kafka, until the old process
  ends can only be the old leader's. There must be none, and it must exit at once with the
  code `handlers.running` exits with on a lost lease (1). The new leader, woken, applies the
  change.
- The apiserver's own record of every write (watched from before the first operator started:
  each object's managedFields entries, with their managers and times, and each Event) shows
  the leader writing until it was frozen, nothing until the standby held the Lease, and the
  two never in the same second. Both replicas write as the same field managers, and only the
  Events of the resync and scaling loops name the replica (reportingInstance, its pod name),
  so who wrote is told by which process could run at the time, not by the objects.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from confluent_kafka.admin import AdminClient

from rillet.api.v1alpha1 import objects as api
from rillet.reconcile import leases
from rillet_devstack.operating import OperatorProcess

from .conftest import Kube
from .kafka_reads import kafka_overrides
from .objects import LEASE, apply, lease_holder, topic, wait_condition
from .polling import wait_for

# The standby sees the last renewal within one retry of it, and takes the lease at the first
# retry after the duration has passed since then; a second more for its requests and the
# test's polling on a loaded 2-core machine.
LEASE_BOUND = leases.DURATION_SECONDS + 2 * leases.RETRY_SECONDS + 1
# The README: "the other takes over within 15 s if it dies".
TAKEOVER_BOUND = 15.0
# A woken leader's keeper finds its deadline long passed at its first look, at once; the new
# leader stays frozen meanwhile and must itself be woken before its own renewal deadline.
WAKE_DEADLINE = leases.RETRY_SECONDS + 0.5
# What `handlers.running._exit_at_once` exits with.
LOST_LEASE_EXIT = 1
# The field manager of the test's own applies (objects.apply).
TESTS = "tests/Apply"


@dataclass(frozen=True)
class Write:
    """One write the apiserver accepted, as its watch delivered it."""

    seen: float  # the test's wall clock on delivery (same host as the apiserver)
    kind: str
    name: str
    managers: frozenset[str]  # "manager/operation" of the managedFields entries it changed
    stamp: datetime  # the apiserver's time of those entries (whole seconds)
    holder: str | None  # a Lease's holder after the write
    version: str  # the object's resourceVersion after the write

    def describe(self) -> str:
        holder = f" holder={self.holder}" if self.kind == "lease" else ""
        managers = ",".join(sorted(self.managers))
        return f"{self.stamp:%H:%M:%S} {self.kind}/{self.name} by {managers}{holder}"


def _entries(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """An object's managedFields: "manager/operation[/subresource]" -> (time, fields)."""
    found = {}
    for entry in obj["metadata"].get("managedFields") or []:
        key = "/".join(
            filter(None, (entry["manager"], entry["operation"], entry.get("subresource")))
        )
        found[key] = (entry.get("time", ""), json.dumps(entry.get("fieldsV1"), sort_keys=True))
    return found


class WriteLog:
    """Every write to the Topics, Events and Leases of a namespace, from watches of the
    apiserver (one thread per kind), with the managers whose entries each write changed."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        load = kubernetes.config.new_client_from_config
        client = load(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
        custom = kubernetes.client.CustomObjectsApi(client)
        self._kinds: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
            "topic": (
                custom.list_namespaced_custom_object,
                (api.GROUP, api.VERSION, namespace, "topics"),
            ),
            "event": (kubernetes.client.CoreV1Api(client).list_namespaced_event, (namespace,)),
            "lease": (
                kubernetes.client.CoordinationV1Api(client).list_namespaced_lease,
                (namespace,),
            ),
        }
        self.writes: list[Write] = []
        self.errors: list[str] = []
        self._last: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._follow, args=(kind,), name=f"watch-{kind}", daemon=True)
            for kind in self._kinds
        ]

    def __enter__(self) -> WriteLog:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _follow(self, kind: str) -> None:
        list_objects, args = self._kinds[kind]
        try:
            listed = json.loads(list_objects(*args, _preload_content=False).data)
            for obj in listed["items"]:
                self._last[(kind, obj["metadata"]["name"])] = _entries(obj)
            version = listed["metadata"]["resourceVersion"]
            watch = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
            while not self._stop.is_set():
                # Short watches, so that the thread sees the stop soon after it is asked to.
                events = watch.stream(  # type: ignore[no-untyped-call]
                    list_objects, *args, resource_version=version, timeout_seconds=2
                )
                for event in events:
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._record(kind, event["raw_object"])
                version = watch.resource_version or version
        except Exception as error:  # the test fails on it: a gap in the log would hide writes
            self.errors.append(f"watch of {kind}s: {error!r}")

    def _record(self, kind: str, obj: dict[str, Any]) -> None:
        seen = time.time()
        now = _entries(obj)
        before = self._last.get((kind, obj["metadata"]["name"]), {})
        self._last[(kind, obj["metadata"]["name"])] = now
        changed = {key: value for key, value in now.items() if before.get(key) != value}
        stamps = [value[0] for value in (changed or now).values() if value[0]]
        write = Write(
            seen=seen,
            kind=kind,
            name=obj["metadata"]["name"],
            # No entry changed: a writer the record cannot name, counted as an operator.
            managers=frozenset(changed) or frozenset({"?"}),
            stamp=datetime.fromisoformat(max(stamps))
            if stamps
            else datetime.fromtimestamp(seen, UTC),
            holder=(obj.get("spec") or {}).get("holderIdentity") if kind == "lease" else None,
            version=obj["metadata"]["resourceVersion"],
        )
        with self._lock:
            self.writes.append(write)

    def operators(self, until: float = float("inf")) -> list[Write]:
        """The writes of operators (all but the test's applies) delivered before `until`."""
        with self._lock:
            return [w for w in self.writes if w.managers - {TESTS} and w.seen < until]

    def split(self, version: str, *, until: float) -> tuple[list[Write], list[Write]]:
        """The operators' writes delivered up to the one that left `version` (included), and
        those after it, before `until`."""
        wait_for(
            lambda: any(w.version == version for w in self.operators()),
            timeout=10,
            what=f"the watch to deliver the write of resourceVersion {version}",
        )
        found = self.operators(until=until)
        cut = next(i for i, w in enumerate(found) if w.version == version) + 1
        return found[:cut], found[cut:]

    def settle(self) -> None:
        """Wait until the operators wrote nothing but the Lease for 1.5 s: none of their
        writes is in flight then (the resync writes nothing while all agrees)."""
        wait_for(
            lambda: all(time.time() - w.seen > 1.5 for w in self.operators() if w.kind != "lease"),
            timeout=30,
            what="the operators' writes to settle",
        )


def _election(namespace: str, identity: str) -> dict[str, str]:
    return {
        "RILLET_LEADER_ELECTION": "true",
        "RILLET_LEASE_NAME": LEASE,
        "RILLET_LEASE_NAMESPACE": namespace,
        "RILLET_POD_NAME": identity,
    }


def _freeze_after_renewal(
    kube: Kube, namespace: str, holder: OperatorProcess, name: str
) -> tuple[float, str]:
    """SIGSTOP `holder` the moment the apiserver shows one of its renewals (its lease keeper
    then waits a second for the next, as it does most of the time); the wall time of the stop
    and the Lease's resourceVersion that renewal left."""
    first = kube.api.read("lease", LEASE, namespace)
    assert first is not None

    def renewal() -> str | None:
        lease = kube.api.read("lease", LEASE, namespace) or first
        version: str = lease["metadata"]["resourceVersion"]
        moved = version != first["metadata"]["resourceVersion"]
        return version if moved and lease["spec"].get("holderIdentity") == name else None

    version = wait_for(renewal, timeout=10, interval=0.02, what=f"a renewal by {name}")
    os.kill(holder.pid, signal.SIGSTOP)
    return time.time(), version


def _retention(kafka_admin: AdminClient, name: str) -> str | None:
    return kafka_overrides(kafka_admin, name).get("retention.ms")


def _exit_code(process: OperatorProcess, timeout: float) -> int | None:
    """The process's exit code, waiting up to `timeout` s for it; None if it still runs."""
    assert process.process is not None
    try:
        return process.process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


@pytest.fixture
def replicas(
    lone_operator: Callable[..., OperatorProcess], kube: Kube, tmp_path: Path
) -> Iterator[tuple[OperatorProcess, OperatorProcess]]:
    """A leader and a standby of one fresh namespace (not started); afterwards neither is left
    frozen, the namespace's Topics go while one still runs, and both stop."""
    leader = lone_operator()
    namespace = leader.namespace_pattern
    leader.settings = _election(namespace, "leader")
    standby = OperatorProcess(
        kubeconfig=leader.kubeconfig,
        bootstrap=leader.bootstrap,
        namespace_pattern=namespace,
        log=tmp_path / "standby.log",
        settings=_election(namespace, "standby"),
    )
    yield leader, standby
    for process in (leader, standby):
        if process.process is not None and process.process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
    kube.kubectl("delete", "topic", "--all", "-n", namespace, "--timeout=60s")
    standby.stop()


def test_a_frozen_leader_is_replaced_in_time_and_never_writes_after_it_wakes(
    kube: Kube,
    replicas: tuple[OperatorProcess, OperatorProcess],
    kafka_admin: AdminClient,
    kafka_prefix: str,
    measurement: Callable[[str], None],
) -> None:
    leader, standby = replicas
    namespace = leader.namespace_pattern
    name = f"{kafka_prefix}-fenced"

    def declare(retention: int) -> None:
        config = {"retention.ms": retention}
        apply(kube, topic(name, namespace, deletionPolicy="Delete", config=config))

    with WriteLog(kube.kubeconfig, namespace) as log:
        leader.start()
        wait_for(lambda: lease_holder(kube, namespace) == "leader", timeout=60, what="a leader")
        standby.start()
        wait_for(lambda: "standing by" in standby.log_text(), timeout=60, what="a standby")
        declare(3_600_000)
        wait_condition(kube, "topic", name, namespace)
        log.settle()

        stopped, last_renewal = _freeze_after_renewal(kube, namespace, leader, "leader")
        declare(7_200_000)
        wait_for(
            lambda: lease_holder(kube, namespace) == "standby",
            timeout=TAKEOVER_BOUND * 2,
            interval=0.1,
            what="the standby to take the Lease",
        )
        handover = time.time() - stopped
        wait_for(
            lambda: _retention(kafka_admin, name) == "7200000",
            timeout=TAKEOVER_BOUND * 2,
            interval=0.1,
            what="the change made meanwhile in Kafka",
        )
        takeover = time.time() - stopped
        wait_condition(kube, "topic", name, namespace)
        log.settle()

        # The old leader wakes with a change to act on, while the new one is frozen: whatever
        # the apiserver or Kafka then takes, until the old process ends, is the old leader's.
        frozen, new_renewal = _freeze_after_renewal(kube, namespace, standby, "standby")
        try:
            declare(10_800_000)
            os.kill(leader.pid, signal.SIGCONT)
            woken = time.time()
            code = _exit_code(leader, WAKE_DEADLINE)
            exited = time.time() - woken
            retention_while_old_awake = _retention(kafka_admin, name)
        finally:
            os.kill(standby.pid, signal.SIGCONT)
            resumed = time.time()
        if code is None:
            code = _exit_code(leader, 30)
            exited = time.time() - woken
        # The new leader carries on: it applies the change made while it was frozen.
        wait_for(
            lambda: _retention(kafka_admin, name) == "10800000",
            timeout=30,
            what="the new leader to apply the change made while it was frozen",
        )
        assert lease_holder(kube, namespace) == "standby"
        assert standby.process is not None
        assert standby.process.poll() is None, "the new leader exited"
        before, after = log.split(last_renewal, until=frozen)
        _, awake = log.split(new_renewal, until=resumed)
    assert not log.errors, log.errors

    measurement(
        f"leader frozen (SIGSTOP): the standby held the Lease {handover:.1f} s later, Kafka had "
        f"the change made meanwhile {takeover:.1f} s later; woken, the old leader exited "
        f"{exited:.2f} s after SIGCONT"
    )
    tail = "\n".join(leader.log_text().splitlines()[-20:])
    assert code == LOST_LEASE_EXIT, f"the woken leader's exit code: {code}; its log:\n{tail}"
    assert exited <= WAKE_DEADLINE, f"the woken leader exited {exited:.2f} s after SIGCONT"
    wrote = [w.describe() for w in awake]
    assert not wrote, f"the woken leader wrote while the new one was frozen: {wrote}"
    assert retention_while_old_awake == "7200000", "the woken leader changed the topic in Kafka"
    assert handover <= LEASE_BOUND, f"the standby took the Lease {handover:.1f} s after the stop"
    assert takeover <= TAKEOVER_BOUND, f"the change was in Kafka {takeover:.1f} s after the stop"

    # The apiserver's record: the leader until it was frozen; then, first of all, the
    # standby's take of the Lease, no sooner than the lease duration after the last renewal;
    # then its reconcile of the change, with an Event.
    take = after[0]
    assert (take.kind, take.holder) == ("lease", "standby"), [w.describe() for w in after[:5]]
    renewal = before[-1]
    assert (renewal.kind, renewal.holder) == ("lease", "leader"), renewal.describe()
    gap = take.seen - renewal.seen
    # The two deliveries' latencies may differ by a moment on a loaded machine.
    assert gap >= leases.DURATION_SECONDS - 0.25, f"the Lease changed hands {gap:.2f} s after"
    last_old, first_new = max(w.stamp for w in before), min(w.stamp for w in after)
    assert last_old < first_new, f"both wrote at {first_new}"
    assert [w for w in after if w.kind == "topic"], "the new leader wrote no status"
    assert [w for w in after if w.kind == "event"], "the new leader posted no Event"
