"""The scaling loop's decisions without a cluster: which Apps it takes, what a pass observes,
decides, reports and tells the driver pod, and what it does with executors on a lost node.

Test plan:
- the loop takes settled, unsuspended Apps not held back by their spec; it reconciles settled
  Apps held back by their spec; an Event only when the count changes;
- pods grouped by namespace, App and role; the stream inputs' Kafka topics and the consumer
  group of an App;
- a pass observes each input's partitions and lag (unknown where Kafka told nothing), the
  driver pod with its progress, and the Running executors; it decides, reports the count it
  decided (with its Event) and keeps the decision's history, and tells the driver pod the count
  when the pod says another;
- without Kafka, the cap is the one the status last gave, else the Topics' declared one, and
  neither the decision nor a new driver's initial executors pass it;
- executors on a lost node are reported first (one Event) and released the pass after, unless
  their driver is on the lost node too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from rillet.driverapi import desires
from rillet.kafka.lag import TopicLag
from rillet.reconcile import (
    appnotes,
    appobservations,
    appresolving,
    apptargets,
    parallelisms,
    scaling,
    scalingdecisions,
)
from tests.unit import wordcount_inputs

ENV = wordcount_inputs.ENV
NAMESPACE = wordcount_inputs.NAMESPACE
UID = wordcount_inputs.UID
NOW = wordcount_inputs.NOW
_status = wordcount_inputs.ready_status


def _app(reason: str | None, *, observed: int = 2, suspend: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {"observedGeneration": observed}
    if reason:
        status |= _status(reason, "")
    return {
        "metadata": {"name": "clicks", "namespace": NAMESPACE, "uid": UID, "generation": 2},
        "spec": {"suspend": suspend},
        "status": status,
    }


@pytest.mark.parametrize(
    ("body", "scalable", "reconciled"),
    [
        (_app("Running"), True, False),
        (_app("DriverCrashLooping"), True, False),
        (_app("DriverStarting", observed=1), False, False),
        (_app("Running", suspend=True), False, False),
        (_app("WaitingForTopics"), False, True),
        (_app("TopicsNotCoPartitioned"), False, True),
        (_app("InvalidSpec"), False, True),
        (_app("WaitingForTopics", observed=1), False, False),
    ],
)
def test_which_apps_the_loop_scales_or_reconciles(
    body: dict[str, Any], scalable: bool, reconciled: bool
) -> None:
    assert apptargets.is_scalable(body) is scalable
    assert apptargets.needs_reconcile(body) is reconciled


def test_an_event_only_when_the_count_changes() -> None:
    decision = scalingdecisions.ScalingDecision(
        desired=4, cap=6, reason="LagAbovePerExecutorTarget", message="lag of 4000", history=()
    )
    assert appnotes.scale_note(4, decision) == ()
    (note,) = appnotes.scale_note(2, decision)
    assert (note.reason, note.message) == ("ExecutorsScaled", "executors 2 to 4: lag of 4000")
    assert appnotes.scale_note(None, decision)[0].message == "executors 4: lag of 4000"


def test_pods_grouped_by_namespace_app_and_role() -> None:
    def pod(namespace: str, app: str, role: str) -> dict[str, Any]:
        labels = {"rillet.io/app": app, "rillet.io/role": role}
        return {"metadata": {"namespace": namespace, "labels": labels}}

    pods = [pod("a", "x", "driver"), pod("a", "x", "executor"), pod("a", "x", "executor")]
    pods.append(pod("b", "x", "executor"))
    grouped = apptargets.group_pods(pods)
    assert {key: len(found) for key, found in grouped.items()} == {
        ("a", "x", "driver"): 1,
        ("a", "x", "executor"): 2,
        ("b", "x", "executor"): 1,
    }


def test_a_target_reads_the_kafka_topics_of_its_stream_inputs() -> None:
    found = wordcount_inputs.bodies()
    found["Topic"]["spec"]["topicName"] = "text.sentences"
    target = apptargets.target_of(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"])
    )
    assert target.group == f"rillet.{NAMESPACE}.wordcount"
    assert target.inputs == (
        appobservations.StreamInput(
            name="sentences",
            topic=f"{NAMESPACE}.text.sentences",
            from_start=True,
            declared_partitions=3,
        ),
    )
    assert target.key == (NAMESPACE, "wordcount")


def test_a_scaling_pass_observes_inputs_pods_and_progress() -> None:
    found = wordcount_inputs.bodies()
    target = apptargets.target_of(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"])
    )
    assert apptargets.observe_inputs(target, {}) == (
        appobservations.InputObservation(name="sentences", topic=f"{NAMESPACE}.sentences"),
    )
    lags = {(target.group, f"{NAMESPACE}.sentences"): TopicLag(partitions=3, lag=1200)}
    inputs = apptargets.observe_inputs(target, lags)
    assert inputs[0].lag == 1200
    driver = {
        "metadata": {"annotations": {"rillet.io/progress": '{"rowsPerSecond": 12.5}'}},
        "status": {"phase": "Running", "containerStatuses": [{"name": "driver", "ready": True}]},
    }
    running: dict[str, Any] = {"metadata": {}, "status": {"phase": "Running"}}
    pods: dict[apptargets.PodKey, list[Mapping[str, Any]]] = {
        (NAMESPACE, "wordcount", "driver"): [driver],
        (NAMESPACE, "wordcount", "executor"): [running, running, {"status": {}}],
    }
    decision = scalingdecisions.ScalingDecision(
        desired=2, cap=3, reason="r", message="m", history=()
    )
    observation = apptargets.observe(target, inputs, decision, pods)
    assert observation.driver is not None
    assert observation.driver.ready
    assert (observation.executors_desired, observation.executors_ready) == (2, 2)
    assert (observation.executors_cap, observation.rows_per_second) == (3, 12.5)
    alone = apptargets.observe(target, inputs, decision, {})
    assert (alone.driver, alone.executors_ready) == (None, 0)


def test_a_scaling_pass_decides_reports_and_keeps_its_history() -> None:
    found = wordcount_inputs.bodies()
    found["App"]["status"] = {"observedGeneration": 1, "executors": {"desired": 1}}
    target = apptargets.target_of(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"])
    )
    lags = {(target.group, f"{NAMESPACE}.sentences"): TopicLag(partitions=3, lag=4000)}
    decision = scaling.plan_executors(
        apptargets.policy_of(found["App"]["spec"]),
        partitions=parallelisms.Parallelism(input_partitions=3),
        lag=4000,
        history=(),
        current=1,
        now=100.0,
    )
    scaled = apptargets.derive_pass(target, lags, {}, history=(), now=100.0, at=NOW)
    assert scaled.history == decision.history
    assert scaled.report.status_patch["executors"]["desired"] == decision.desired
    assert decision.desired > 1  # a lag of 4000 asks for more than the one executor asked for
    assert scaled.report.notes[0] == appnotes.scale_note(1, decision)[0]


def test_a_scaling_pass_tells_the_driver_pod_its_count_when_it_says_another() -> None:
    found = wordcount_inputs.bodies()
    found["App"]["status"] = {"observedGeneration": 1, "executors": {"desired": 1}}
    target = apptargets.target_of(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"])
    )
    lags = {(target.group, f"{NAMESPACE}.sentences"): TopicLag(partitions=3, lag=4000)}
    driver: dict[str, Any] = {"metadata": {"name": "wordcount-driver-0"}}
    pods: dict[apptargets.PodKey, list[Mapping[str, Any]]] = {
        (NAMESPACE, "wordcount", "driver"): [driver]
    }

    def pass_() -> apptargets.Pass:
        return apptargets.derive_pass(target, lags, pods, history=(), now=100.0, at=NOW)

    desired = pass_().report.status_patch["executors"]["desired"]
    assert pass_().driver_patch == ("wordcount-driver-0", desires.build_desired_patch(desired))
    driver["metadata"]["annotations"] = {"rillet.io/executors-desired": str(desired)}
    assert pass_().driver_patch is None  # the pod says it already
    assert (
        apptargets.derive_pass(target, lags, {}, history=(), now=1.0, at=NOW).driver_patch is None
    )


def test_the_cap_of_a_pass_without_kafka_is_the_last_known_or_the_declared_one() -> None:
    found = wordcount_inputs.bodies()  # its Topic declares 3 partitions
    target = apptargets.target_of(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"])
    )
    unknown = apptargets.observe_inputs(target, {})
    stateful = {
        "metadata": {"annotations": {"rillet.io/progress": '{"statePartitions": 8}'}},
    }

    declared = apptargets.parallelism_of(target, unknown, None)
    reported = apptargets.parallelism_of(target, unknown, stateful)
    found["App"]["status"] = {"partitions": 2, "statePartitions": 4}
    known = apptargets.parallelism_of(target, unknown, None)

    assert declared == parallelisms.Parallelism(input_partitions=3)
    assert known == parallelisms.Parallelism(input_partitions=2, state_partitions=4)
    assert reported == parallelisms.Parallelism(input_partitions=3, state_partitions=8)


def test_an_operator_that_has_not_read_kafka_keeps_a_driver_within_the_cap() -> None:
    found = wordcount_inputs.bodies()
    found["App"]["spec"]["scaling"] = {"minExecutors": 5, "maxExecutors": 8}
    found["App"]["status"] = {"partitions": 2}
    target = apptargets.target_of(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"])
    )
    parallelism = apptargets.parallelism_of(target, apptargets.observe_inputs(target, {}), None)

    decision = scaling.plan_executors(
        apptargets.policy_of(found["App"]["spec"]),
        partitions=parallelism,
        lag=None,
        history=(),
        current=None,
        now=0.0,
    )
    resolved = appresolving.resolve(found["App"], wordcount_inputs.views(*found.values()), ENV)

    assert (decision.desired, decision.cap) == (2, 2)
    assert resolved.objects is not None
    assert resolved.objects.spark_conf["spark.executor.instances"] == "2"


def _pods_on(driver_node: str) -> dict[apptargets.PodKey, list[Mapping[str, Any]]]:
    def pod(name: str, node: str, uid: str) -> dict[str, Any]:
        meta = {"name": name, "uid": uid}
        return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": "Running"}}

    return {
        (NAMESPACE, "wordcount", "driver"): [pod("wordcount-driver-0", driver_node, "u0")],
        (NAMESPACE, "wordcount", "executor"): [
            pod("wordcount-exec-1", "n1", "u1"),
            pod("wordcount-exec-2", "n2", "u2"),
        ],
    }


def test_executors_on_a_lost_node_are_reported_first_and_released_the_pass_after() -> None:
    found = wordcount_inputs.bodies()
    views = wordcount_inputs.views(found["Topic"], found["Table"])
    lost = frozenset({"n2"})

    def scaled() -> apptargets.Pass:
        target = apptargets.target_of(found["App"], views)
        return apptargets.derive_pass(
            target, {}, _pods_on("n1"), history=(), now=1.0, at=NOW, lost_nodes=lost
        )

    first = scaled()
    assert first.report.status_patch["executors"]["lost"] == 1
    assert [n.reason for n in first.report.notes if n.reason == "ExecutorsLost"] == [
        "ExecutorsLost"
    ]
    assert first.released == ()  # the status says so before the pod goes

    found["App"]["status"] = {"executors": {"lost": 1}}
    second = scaled()
    assert second.released == (("wordcount-exec-2", "u2"),)
    assert not [n for n in second.report.notes if n.reason == "ExecutorsLost"]  # told once


def test_executors_lost_with_their_driver_are_not_released() -> None:
    found = wordcount_inputs.bodies()
    found["App"]["status"] = {"executors": {"lost": 1}}
    target = apptargets.target_of(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"])
    )
    # The driver on the lost node too (as a checkpoint volume's executors always are): the
    # App waits for its driver, and new executors could start nowhere else.
    scaled = apptargets.derive_pass(
        target, {}, _pods_on("n2"), history=(), now=1.0, at=NOW, lost_nodes=frozenset({"n2"})
    )
    assert scaled.released == ()
