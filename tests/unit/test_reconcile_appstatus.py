"""Deriving an App's status from observations (pure).

Test plan:
- each standing, table-tested: phase, the (Ready, Reconciling, Stalled) statuses and reason,
  in priority order (suspend, spec, references, co-partitioning, image, the driver's refusals
  (lost checkpoint, contract version, schema registry), crash loop, starting, failing batches,
  running);
- messages name the missing and unready objects, and a crash loop's message is the last line of
  the driver's error (not Spark's shutdown log lines after it);
- Ready is True only while the driver runs, its batches succeed and an executor is registered
  (or none is wanted and there is nothing to read): otherwise WaitingForExecutors, or
  ExecutorsUnschedulable with the scheduler's reason;
- the cap says what binds it, and the state's partitions are shown;
- counts: executors, per-input partitions and lag, totals (partitions only when all known),
  lastBatchTime in RFC 3339 UTC, rowsPerSecond rounded; unset fields left out;
- transition times are kept while statuses hold, also through a suspension; the derived status
  validates against the API model and an unchanged observation gives an empty merge patch.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from rillet.api.v1alpha1 import apps
from rillet.driverapi import runspecs, terminations
from rillet.reconcile import appobservations, appstatus, checkpointloss, statuses
from rillet.reconcile.appobservations import AppObservation, DriverObservation, InputObservation
from rillet.runtime.pod import terminating

NOW = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
RUNNING_DRIVER = DriverObservation(phase="Running", ready=True)
LOST = "the checkpoint holds no offsets for table-counts (12 records in topic counts); restore it"
INPUTS = (
    InputObservation(name="clicks", topic="clicks", partitions=6, lag=1200),
    InputObservation(name="views", topic="team.views", partitions=3, lag=30),
)
IDLE_INPUTS = (InputObservation(name="clicks", topic="clicks", partitions=6, lag=0),)
READY = ("True", "False", "False")
SPARK_TAIL = """Traceback (most recent call last):
  File "/opt/rillet/venv/bin/rillet", line 8, in <module>
pyspark.errors.exceptions.captured.AnalysisException: [UNRESOLVED_COLUMN] `wrd` cannot be resolved.
25/03/04 05:06:07 INFO SparkContext: Successfully stopped SparkContext
25/03/04 05:06:07 INFO ShutdownHookManager: Deleting directory /tmp/spark-1
"""


def _observe(**changes: Any) -> AppObservation:
    base: dict[str, Any] = {
        "generation": 4,
        "driver": RUNNING_DRIVER,
        "executors_desired": 3,
        "executors_ready": 2,
        "executors_cap": 9,
        "inputs": INPUTS,
    }
    return AppObservation(**(base | changes))


def _statuses(status: dict[str, Any]) -> tuple[str, ...]:
    return tuple(c["status"] for c in status["conditions"])


@pytest.mark.parametrize(
    ("changes", "phase", "triple", "reason"),
    [
        ({}, "Running", ("True", "False", "False"), "Running"),
        ({"suspend": True}, "Suspended", (None, "False", "False"), "Suspended"),
        (
            {"suspend": True, "missing_references": ("Topic clicks",)},
            "Suspended",
            (None, "False", "False"),
            "Suspended",
        ),
        ({"spec_problems": ("no schema",)}, "Failed", ("False", "False", "True"), "InvalidSpec"),
        (
            {"missing_references": ("Topic clicks",)},
            "Pending",
            ("False", "True", "False"),
            "WaitingForTopics",
        ),
        (
            {"unready_references": ("Table counts",)},
            "Pending",
            ("False", "True", "False"),
            "WaitingForTopics",
        ),
        (
            {"copartitioning_problems": ("clicks has 6 partitions, views 3",)},
            "Failed",
            ("False", "False", "True"),
            "TopicsNotCoPartitioned",
        ),
        (
            {
                "missing_references": ("Topic views",),
                "copartitioning_problems": ("clicks has 6 partitions, views 3",),
            },
            "Pending",
            ("False", "True", "False"),
            "WaitingForTopics",
        ),
        ({"driver": None}, "Pending", ("False", "True", "False"), "DriverStarting"),
        (
            {"driver": DriverObservation(phase="Pending", waiting_reason="ContainerCreating")},
            "Pending",
            ("False", "True", "False"),
            "DriverStarting",
        ),
        (
            {"driver": DriverObservation(phase="Running", ready=False)},
            "Pending",
            ("False", "True", "False"),
            "DriverStarting",
        ),
        (
            {"driver": DriverObservation(phase="Pending", waiting_reason="ImagePullBackOff")},
            "Failed",
            ("False", "False", "True"),
            "DriverImageUnavailable",
        ),
        (
            {
                "driver": DriverObservation(
                    phase="Running",
                    restart_count=4,
                    waiting_reason="CrashLoopBackOff",
                    last_exit_code=1,
                    last_message=SPARK_TAIL,
                )
            },
            "Failed",
            ("False", "False", "True"),
            "DriverCrashLooping",
        ),
        (
            {
                "driver": DriverObservation(
                    phase="Running",
                    restart_count=1,
                    last_exit_code=1,
                    last_message=f"{appstatus.CHECKPOINT_LOST_ERROR}{LOST}",
                )
            },
            "Failed",
            ("False", "False", "True"),
            "CheckpointLost",
        ),
        (
            {"batch_error": "Kafka broker unreachable"},
            "Running",
            ("False", "True", "False"),
            "BatchesFailing",
        ),
        # No executor registered: client-mode Spark runs no task on the driver.
        (
            {"executors_ready": 0},
            "Running",
            ("False", "True", "False"),
            "WaitingForExecutors",
        ),
        (
            {"executors_ready": 2, "executors_registered": 0},
            "Running",
            ("False", "True", "False"),
            "WaitingForExecutors",
        ),
        (
            {
                "executors_ready": 0,
                "executors_unschedulable": appobservations.UnschedulableExecutors(
                    3, "Insufficient cpu"
                ),
            },
            "Running",
            ("False", "True", "False"),
            "ExecutorsUnschedulable",
        ),
        # One registered is enough to process; none wanted with nothing to read is idle, Ready.
        ({"executors_ready": 0, "executors_registered": 1}, "Running", READY, "Running"),
        (
            {"executors_ready": 0, "executors_desired": 0, "inputs": IDLE_INPUTS},
            "Running",
            READY,
            "Running",
        ),
        (
            {"executors_ready": 0, "executors_desired": 0},
            "Running",
            ("False", "True", "False"),
            "WaitingForExecutors",
        ),
    ],
)
def test_standing_phase_and_conditions(
    changes: dict[str, Any], phase: str, triple: tuple[str | None, str, str], reason: str
) -> None:
    """(Ready, Reconciling, Stalled); None: no such condition (a suspended App has no Ready)."""
    status = appstatus.app_status(_observe(**changes), previous=None, now=NOW)

    assert status["phase"] == phase
    expected = zip(("Ready", "Reconciling", "Stalled"), triple, strict=True)
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        (kind, value) for kind, value in expected if value is not None
    ]
    assert {c["reason"] for c in status["conditions"]} == {reason}
    assert appstatus.is_ready(status) is (reason == "Running")


def test_waiting_message_names_the_missing_and_unready_objects() -> None:
    observation = _observe(
        missing_references=("Topic clicks", "Table counts"), unready_references=("Topic views",)
    )

    standing = appstatus.derive_standing(observation)

    assert standing.verdict.message == (
        "waiting for Topic clicks not found, Table counts not found, Topic views not Ready"
    )


def test_crash_loop_message_is_the_last_line_of_the_driver_error() -> None:
    driver = DriverObservation(
        phase="Running",
        restart_count=4,
        waiting_reason="CrashLoopBackOff",
        last_exit_code=1,
        last_message=SPARK_TAIL,
    )

    message = appstatus.derive_standing(_observe(driver=driver)).verdict.message

    assert message == (
        "pyspark.errors.exceptions.captured.AnalysisException: [UNRESOLVED_COLUMN] `wrd` cannot "
        "be resolved. (exit code 1)"
    )


@pytest.mark.parametrize(
    ("message", "line"),
    [
        (None, None),
        ("", None),
        ("\n  \n", None),
        ("boom\n", "boom"),
        ("ValueError: bad\n2025-03-04 05:06:07,123 INFO rillet: stopped\n", "ValueError: bad"),
        (
            "25/03/04 05:06:07 INFO A: b\n25/03/04 05:06:08 INFO A: c\n",
            "25/03/04 05:06:08 INFO A: c",
        ),
        ("x" * 5000, "x" * terminations.MESSAGE_LIMIT),
    ],
)
def test_error_line(message: str | None, line: str | None) -> None:
    assert terminations.error_line(message) == line


def test_crash_loop_without_a_message_counts_the_restarts() -> None:
    driver = DriverObservation(
        phase="Running", restart_count=5, waiting_reason="CrashLoopBackOff", last_exit_code=137
    )

    message = appstatus.derive_standing(_observe(driver=driver)).verdict.message

    assert message == "the driver exited (exit code 137) 5 times; see its logs"


def test_a_lost_checkpoint_stalls_from_the_first_exit_until_the_driver_runs() -> None:
    refused = DriverObservation(
        phase="Running",
        restart_count=1,
        last_exit_code=1,
        last_message=f"{appstatus.CHECKPOINT_LOST_ERROR}{LOST}\n",
    )
    running_again = DriverObservation(
        phase="Running", ready=True, restart_count=2, last_message=refused.last_message
    )

    stalled = appstatus.derive_standing(_observe(driver=refused)).verdict

    assert (stalled.reason, stalled.message) == ("CheckpointLost", LOST)
    assert appstatus.derive_standing(_observe(driver=running_again)).verdict.reason == "Running"


def test_the_drivers_own_termination_message_of_a_lost_checkpoint_is_recognized() -> None:
    """What `rillet drive` writes to the termination log for the error the driver raises."""
    written = terminating.summarize_error(checkpointloss.CheckpointLostError(LOST))
    driver = DriverObservation(phase="Running", restart_count=1, last_message=written)

    stalled = appstatus.derive_standing(_observe(driver=driver)).verdict

    assert (stalled.reason, stalled.message) == ("CheckpointLost", LOST)


def test_a_run_spec_of_another_contract_version_stalls_the_app_saying_what_to_do() -> None:
    """What `rillet drive` writes for a run spec it refuses reaches the App's conditions."""
    refusal = runspecs.ContractMismatchError(runspecs.mismatch_message(2))
    written = terminating.summarize_error(refusal)
    driver = DriverObservation(phase="Running", restart_count=1, last_message=written)

    standing = appstatus.derive_standing(_observe(driver=driver))

    assert standing.phase == "Failed"
    assert standing.verdict.reason == "DriverContractMismatch"
    assert standing.verdict.message == runspecs.mismatch_message(2)
    assert "different Rillet releases" in standing.verdict.message


def test_a_schema_registry_refusal_stalls_the_app_with_the_registrys_message() -> None:
    """What `rillet drive` writes when the registry refuses an Avro schema of the App."""
    said = (
        "subject orders-value: Schema being registered is incompatible with an earlier schema "
        'for subject "orders-value" (409)'
    )
    written = terminating.summarize_error(terminations.SchemaRegistryRefusedError(said))
    driver = DriverObservation(phase="Running", restart_count=1, last_message=written)

    standing = appstatus.derive_standing(_observe(driver=driver))

    assert standing.phase == "Failed"
    assert (standing.verdict.state, standing.verdict.reason) == ("stalled", "SchemaRegistryRefused")
    assert standing.verdict.message == said


def test_a_restarting_driver_says_why_it_restarts() -> None:
    driver = DriverObservation(
        phase="Running", restart_count=1, last_exit_code=1, last_message="RuntimeError: x"
    )

    standing = appstatus.derive_standing(_observe(driver=driver))

    assert standing.verdict.reason == appstatus.DRIVER_STARTING
    assert (
        standing.verdict.message == "the driver is restarting after: RuntimeError: x (exit code 1)"
    )


@pytest.mark.parametrize(
    ("driver", "message"),
    [
        (
            DriverObservation(
                phase="Pending",
                waiting_reason="Unschedulable",
                waiting_message="0/3 nodes are available: 3 Insufficient cpu.",
            ),
            "the driver pod cannot be scheduled yet: 0/3 nodes are available: 3 Insufficient cpu.",
        ),
        (DriverObservation(phase="Pending"), "the driver pod is waiting for the scheduler"),
        (
            DriverObservation(phase="Pending", node_name="worker-2"),
            "the driver pod is waiting for the kubelet of node worker-2",
        ),
        (
            DriverObservation(
                phase="Pending", node_name="worker-2", waiting_reason="ContainerCreating"
            ),
            "the driver is starting (ContainerCreating)",
        ),
    ],
)
def test_a_pending_driver_says_what_it_waits_for(driver: DriverObservation, message: str) -> None:
    standing = appstatus.derive_standing(_observe(driver=driver))

    assert standing.verdict.reason == appstatus.DRIVER_STARTING
    assert standing.verdict.message == message


def test_executors_no_node_fits_are_named_in_the_progress() -> None:
    unplaced = appobservations.UnschedulableExecutors(
        1, "0/1 nodes are available: 1 Insufficient cpu."
    )
    observation = _observe(executors_unschedulable=unplaced)

    status = appstatus.app_status(observation, previous=None, now=NOW)

    assert status["conditions"][0]["message"] == (
        "the driver is running, 2/3 executors ready (1 cannot be scheduled: 0/1 nodes are "
        "available: 1 Insufficient cpu.), lag 1230 records"
    )


def test_executors_no_node_fits_make_the_app_not_ready_with_the_schedulers_reason() -> None:
    unplaced = appobservations.UnschedulableExecutors(
        3, "0/1 nodes are available: 1 Insufficient cpu."
    )
    observation = _observe(executors_ready=0, executors_unschedulable=unplaced)

    status = appstatus.app_status(observation, previous=None, now=NOW)

    ready = status["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == (
        "Ready",
        "False",
        "ExecutorsUnschedulable",
    )
    assert ready["message"] == (
        "the driver is running, 0/3 executors ready (3 cannot be scheduled: 0/1 nodes are "
        "available: 1 Insufficient cpu.), lag 1230 records"
    )


def test_the_cap_says_what_binds_it_and_the_state_partitions_are_shown() -> None:
    observation = _observe(executors_cap=9, executors_cap_by="InputPartitions", state_partitions=2)

    status = appstatus.app_status(observation, previous=None, now=NOW)

    assert status["executors"] == {"desired": 3, "ready": 2, "cap": 9, "capBy": "InputPartitions"}
    assert status["statePartitions"] == 2
    apps.AppStatus.model_validate(status)


def test_running_status_carries_counts_and_progress() -> None:
    observation = _observe(
        last_batch_time=datetime(2025, 3, 4, 6, 6, 7, tzinfo=timezone(timedelta(hours=1))),
        rows_per_second=1234.5678,
    )

    status = appstatus.app_status(observation, previous=None, now=NOW)

    assert {k: v for k, v in status.items() if k != "conditions"} == {
        "observedGeneration": 4,
        "phase": "Running",
        "partitions": 9,
        "executors": {"desired": 3, "ready": 2, "cap": 9},
        "inputs": [
            {"name": "clicks", "topic": "clicks", "partitions": 6, "lag": 1200},
            {"name": "views", "topic": "team.views", "partitions": 3, "lag": 30},
        ],
        "lag": 1230,
        "lastBatchTime": "2025-03-04T05:06:07Z",
        "rowsPerSecond": 1234.6,
    }
    assert status["conditions"][0]["message"] == (
        "the driver is running, 2/3 executors ready, lag 1230 records"
    )
    assert {c["observedGeneration"] for c in status["conditions"]} == {4}


def test_unknown_counts_are_left_out() -> None:
    observation = AppObservation(
        generation=1,
        inputs=(InputObservation(name="a", topic="a"), InputObservation(name="b", topic="b")),
        executors_cap=0,
    )

    status = appstatus.app_status(observation, previous=None, now=NOW)

    assert set(status) == {"observedGeneration", "conditions", "phase", "inputs"}
    assert status["inputs"] == [{"name": "a", "topic": "a"}, {"name": "b", "topic": "b"}]


@pytest.mark.parametrize(
    ("partitions", "lags", "total_partitions", "total_lag"),
    [
        ((6, 3), (10, 5), 9, 15),
        ((6, None), (10, None), None, 10),
        ((None, None), (None, None), None, None),
        ((), (), None, None),
    ],
)
def test_totals(
    partitions: tuple[int | None, ...],
    lags: tuple[int | None, ...],
    total_partitions: int | None,
    total_lag: int | None,
) -> None:
    inputs = [
        InputObservation(name=f"i{n}", topic="t", partitions=p, lag=lag)
        for n, (p, lag) in enumerate(zip(partitions, lags, strict=True))
    ]

    assert appstatus.total_partitions(inputs) == total_partitions
    assert appstatus.total_lag(inputs) == total_lag


def test_transition_times_hold_while_statuses_hold() -> None:
    first = appstatus.app_status(_observe(), previous=None, now=NOW)
    later = NOW + timedelta(minutes=5)

    again = appstatus.app_status(_observe(), previous=first, now=later)
    starting = appstatus.app_status(_observe(driver=None), previous=first, now=later)

    assert again == first
    assert statuses.merge_patch(first, again) == {}
    times = {c["type"]: c["lastTransitionTime"] for c in starting["conditions"]}
    assert times == {
        "Ready": "2025-03-04T05:11:07Z",
        "Reconciling": "2025-03-04T05:11:07Z",
        "Stalled": "2025-03-04T05:06:07Z",
    }


def test_suspending_a_running_app_drops_ready_keeping_other_times() -> None:
    running = appstatus.app_status(_observe(), previous=None, now=NOW)
    later = NOW + timedelta(minutes=1)

    suspended = appstatus.app_status(_observe(suspend=True), previous=running, now=later)
    still = appstatus.app_status(
        _observe(suspend=True), previous=suspended, now=later + timedelta(minutes=1)
    )

    times = {c["type"]: c["lastTransitionTime"] for c in suspended["conditions"]}
    # No Ready: kstatus would call a Ready False App InProgress for as long as it is suspended.
    assert times == {"Reconciling": "2025-03-04T05:06:07Z", "Stalled": "2025-03-04T05:06:07Z"}
    assert still == suspended
    resumed = appstatus.app_status(_observe(), previous=still, now=later + timedelta(minutes=2))
    assert _statuses(resumed) == ("True", "False", "False")


@pytest.mark.parametrize(
    "observation",
    [
        _observe(last_batch_time=NOW, rows_per_second=10.0),
        _observe(suspend=True),
        _observe(driver=None, inputs=()),
        AppObservation(generation=None),
    ],
)
def test_derived_status_is_a_valid_app_status(observation: AppObservation) -> None:
    status = appstatus.app_status(observation, previous=None, now=NOW)

    assert apps.AppStatus.model_validate(status).to_wire() == status


def test_a_driver_on_a_lost_node_stalls_the_app_and_says_how_it_comes_back() -> None:
    lost = DriverObservation(phase="Running", ready=False, node_name="n2", node_lost=True)
    status = appstatus.app_status(_observe(driver=lost), previous=None, now=NOW)
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert (status["phase"], _statuses(status)) == ("Failed", ("False", "False", "True"))
    assert stalled["reason"] == "DriverNodeLost"
    assert "node n2 is not Ready" in stalled["message"]
    assert "kubectl taint node n2 node.kubernetes.io/out-of-service" in stalled["message"]


def test_executors_by_node_and_lost_ones_are_in_the_status_and_the_progress() -> None:
    observation = _observe(executors_by_node=(("n1", 2),), executors_lost=1)
    status = appstatus.app_status(observation, previous=None, now=NOW)
    assert status["executors"]["nodes"] == [{"name": "n1", "running": 2}]
    assert status["executors"]["lost"] == 1
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert "(1 lost with their node)" in ready["message"]
    assert "lost" not in appstatus.app_status(_observe(), previous=None, now=NOW)["executors"]
