"""Reading what the operator sees of an App: references, inputs, pods, progress (pure).

Test plan:
- references: every topicRef and tableRef of inputs and outputs, and the dead-letter Topic, in
  order, once each; the written Tables are the tableRef outputs;
- a reference not among the bodies is missing, one there without Ready=True is not Ready;
- stream inputs: topicRef inputs with their Kafka names, external inputs as named, Table inputs
  left out (no lag), a Topic not yet known left out;
- co-partitioning: inputs of different counts, a written Table of another count; unknown
  counts pass;
- the driver pod: running and ready; crash-looping with the last terminated message; not
  scheduled (the scheduler's reason); bound (its node); a pod being deleted is not ready;
- the progress annotation is read as the runtime writes it (the same annotation name); a bad or
  missing one reads as empty, never as an error;
- only Running executor pods not being deleted count; those no node fits are counted, with
  the scheduler's reason.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from rillet.driverapi import reports
from rillet.reconcile import appobservations
from rillet.reconcile.appobservations import StreamInput

SPEC: dict[str, Any] = {
    "inputs": [
        {"name": "clicks", "topicRef": {"name": "clicks"}},
        {"name": "users", "tableRef": {"name": "users"}},
        {"name": "raw", "external": {"topicName": "legacy.raw"}, "startingOffsets": "earliest"},
    ],
    "outputs": [
        {"tableRef": {"name": "counts"}, "keyColumns": ["page"]},
        {"topicRef": {"name": "clicks"}},
        {"tableRef": {"name": "counts"}, "from": "other", "keyColumns": ["page"]},
    ],
    "deadLetterTopic": {"topicRef": {"name": "bad-clicks"}},
}


def _ready(status: str = "True") -> dict[str, Any]:
    return {"status": {"conditions": [{"type": "Ready", "status": status}]}}


def test_references_are_listed_once_in_order() -> None:
    assert appobservations.references(SPEC) == (
        ("Topic", "clicks"),
        ("Table", "users"),
        ("Table", "counts"),
        ("Topic", "bad-clicks"),
    )
    assert appobservations.written_tables(SPEC) == ("counts",)


def test_missing_and_unready_references() -> None:
    check = appobservations.check_references(
        appobservations.references(SPEC),
        {
            ("Topic", "clicks"): _ready(),
            ("Table", "users"): _ready("False"),
            ("Table", "counts"): {"status": {}},
        },
    )
    assert check.missing == ("Topic bad-clicks",)
    assert check.unready == ("Table users", "Table counts")
    assert not check.ok
    assert appobservations.check_references(
        [("Topic", "clicks")], {("Topic", "clicks"): _ready()}
    ).ok


def test_stream_inputs_resolve_kafka_names() -> None:
    assert appobservations.stream_inputs(SPEC, {"clicks": "team.clicks"}) == (
        StreamInput(name="clicks", topic="team.clicks"),
        StreamInput(name="raw", topic="legacy.raw", from_start=True),
    )
    assert appobservations.stream_inputs(SPEC, {}) == (
        StreamInput(name="raw", topic="legacy.raw", from_start=True),
    )


def test_inputs_of_different_partition_counts_are_not_copartitioned() -> None:
    problems = appobservations.copartitioning_problems([("clicks", 6), ("views", 3)], [])
    assert problems == (
        "the stream inputs have different partition counts (clicks has 6, views has 3): give "
        "their topics the same number of partitions",
    )


def test_a_written_table_of_another_count_is_not_copartitioned() -> None:
    problems = appobservations.copartitioning_problems(
        [("clicks", 6), ("raw", None)], [("counts", 2), ("totals", 6), ("new", None)]
    )
    assert problems == (
        "Table counts has 2 partitions but the inputs have 6: set its spec.partitions to 6 (or "
        "remove it to follow the inputs)",
    )
    assert appobservations.copartitioning_problems([("raw", None)], [("counts", 2)]) == ()


def _pod(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "clicks-driver-0"}, "status": status}


def test_a_running_ready_driver() -> None:
    pod = _pod(
        phase="Running",
        containerStatuses=[
            {"name": "sidecar", "ready": False, "restartCount": 7},
            {"name": "driver", "ready": True, "restartCount": 1, "state": {"running": {}}},
        ],
    )
    driver = appobservations.driver_observation(pod)
    assert (driver.phase, driver.ready, driver.restart_count) == ("Running", True, 1)
    assert driver.waiting_reason is None


def test_a_crash_looping_driver_shows_its_last_words() -> None:
    pod = _pod(
        phase="Running",
        containerStatuses=[
            {
                "name": "driver",
                "ready": False,
                "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                "lastState": {"terminated": {"exitCode": 1, "message": "ValueError: boom\n"}},
            }
        ],
    )
    driver = appobservations.driver_observation(pod)
    assert driver.waiting_reason == "CrashLoopBackOff"
    assert (driver.last_exit_code, driver.last_message) == (1, "ValueError: boom\n")


def test_an_unscheduled_driver_says_why() -> None:
    pod = _pod(
        phase="Pending",
        conditions=[
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1"}
        ],
    )
    driver = appobservations.driver_observation(pod)
    assert (driver.phase, driver.waiting_reason, driver.waiting_message) == (
        "Pending",
        "Unschedulable",
        "0/1",
    )
    assert appobservations.driver_observation({"metadata": {}}).phase == "Pending"


def test_a_bound_driver_names_its_node() -> None:
    pod = {**_pod(phase="Pending"), "spec": {"nodeName": "worker-2"}}
    assert appobservations.driver_observation(pod).node_name == "worker-2"
    assert appobservations.driver_observation(_pod(phase="Pending")).node_name is None


def test_a_driver_being_deleted_is_not_ready() -> None:
    pod = _pod(phase="Running", containerStatuses=[{"name": "driver", "ready": True}])
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not appobservations.driver_observation(pod).ready


def _annotated(value: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {reports.PROGRESS_ANNOTATION: value}}}


def test_progress_is_read_as_the_runtime_writes_it() -> None:
    report = reports.Progress(
        executors=3,
        last_batch_time=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        rows_per_second=1520.46,
        batches=812,
        application_id="spark-5f0c",
    )
    patch = reports.build_annotation_patch(report)
    progress = reports.read_progress(patch)
    assert progress == reports.Progress(
        executors=3,
        last_batch_time=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        rows_per_second=1520.5,
        batches=812,
        application_id="spark-5f0c",
    )


def test_bad_or_missing_progress_reads_as_empty() -> None:
    empty = reports.Progress()
    assert reports.read_progress(None) == empty
    assert reports.read_progress({"metadata": {}}) == empty
    assert reports.read_progress(_annotated("{not json")) == empty
    assert reports.read_progress(_annotated("[1, 2]")) == empty
    odd = json.dumps({"executors": True, "lastBatchTime": "yesterday", "rowsPerSecond": "fast"})
    assert reports.read_progress(_annotated(odd)) == empty


def test_only_running_executors_not_being_deleted_count() -> None:
    pods = [
        {"metadata": {}, "status": {"phase": "Running"}},
        {"metadata": {}, "status": {"phase": "Pending"}},
        {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Running"}},
        {"metadata": {}, "status": {"phase": "Running"}},
    ]
    assert appobservations.count_running_executors(pods) == 2


def _unplaced(message: str, **metadata: Any) -> dict[str, Any]:
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    return {
        "metadata": metadata,
        "status": {"phase": "Pending", "conditions": [{**condition, "message": message}]},
    }


def test_executors_no_node_fits_are_counted_with_the_schedulers_reason() -> None:
    pods = [
        {"metadata": {}, "status": {"phase": "Running"}},
        _unplaced("0/1 nodes are available: 1 Insufficient cpu."),
        _unplaced("0/1 nodes are available: 1 Insufficient cpu."),
        _unplaced("gone anyway", deletionTimestamp="2026-01-01T00:00:00Z"),
        {"metadata": {}, "status": {"phase": "Pending"}},  # not looked at yet
    ]
    assert appobservations.unschedulable_executors(pods) == appobservations.UnschedulableExecutors(
        2, "0/1 nodes are available: 1 Insufficient cpu."
    )
    assert appobservations.unschedulable_executors(pods[:1]) is None


def _node(name: str, ready: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, **_ready(ready)}


def test_nodes_whose_kubelet_stopped_reporting_are_lost() -> None:
    # Unknown: no kubelet reports (down or cut off). False: its kubelet reports, and is in charge.
    nodes = [_node("n1", "True"), _node("n2", "Unknown"), _node("n3", "False")]
    assert appobservations.lost_nodes(nodes) == {"n2"}
    # A node registering, with no Ready condition yet, is not lost: nothing ran there.
    assert appobservations.lost_nodes([{"metadata": {"name": "new"}, "status": {}}]) == set()


def _executor(node: str, phase: str = "Running", **metadata: Any) -> dict[str, Any]:
    return {"metadata": metadata, "spec": {"nodeName": node}, "status": {"phase": phase}}


def test_executors_are_counted_by_node_and_those_on_lost_nodes_as_lost() -> None:
    pods = [
        _executor("n1"),
        _executor("n2"),
        _executor("n1"),
        _executor("n3"),
        # Evicted from the lost node: Terminating until the node returns, still Running.
        _executor("n3", deletionTimestamp="2026-01-01T00:00:00Z"),
        _executor("n3", phase="Failed"),  # ended: nothing lost
        _executor("n2", deletionTimestamp="2026-01-01T00:00:00Z"),  # scaled down: going
    ]
    lost = frozenset({"n3"})
    assert appobservations.executors_by_node(pods, lost_nodes=lost) == (("n1", 2), ("n2", 1))
    assert appobservations.count_running_executors(pods, lost_nodes=lost) == 3
    assert appobservations.count_lost_executors(pods, lost_nodes=lost) == 2


def test_a_driver_on_a_lost_node_is_seen_so() -> None:
    pod = {**_pod(phase="Running"), "spec": {"nodeName": "n2"}}
    assert appobservations.driver_observation(pod, lost_nodes=frozenset({"n2"})).node_lost
    assert not appobservations.driver_observation(pod, lost_nodes=frozenset({"n1"})).node_lost


def test_the_executor_pods_on_lost_nodes_are_named_with_their_uid() -> None:
    pods = [
        {**_executor("n2"), "metadata": {"name": "e1", "uid": "u1"}},
        {**_executor("n2", phase="Failed"), "metadata": {"name": "e2", "uid": "u2"}},
        {**_executor("n1"), "metadata": {"name": "e3", "uid": "u3"}},
    ]
    assert appobservations.lost_executor_pods(pods, lost_nodes=frozenset({"n2"})) == (("e1", "u1"),)
