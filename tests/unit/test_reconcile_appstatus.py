"""Deriving an App's standing and conditions from observations (pure); what they say of the
driver: test_reconcile_appstatus_driver; the figures shown: test_reconcile_appstatus_counts.

Test plan:
- each standing, table-tested: phase, the (Ready, Reconciling, Stalled) statuses and reason,
  in priority order (suspend, spec, references, co-partitioning, image, a lost checkpoint,
  crash loop, starting, failing batches, running);
- Ready is True only while the driver runs, its batches succeed and an executor is registered
  (or none is wanted and there is nothing to read): otherwise WaitingForExecutors, or
  ExecutorsUnschedulable;
- the waiting message names the missing and unready objects;
- transition times are kept while statuses hold, also through a suspension (which drops
  Ready); the derived status validates against the API model and an unchanged observation
  gives an empty merge patch.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from rillet.api.v1alpha1 import apps
from rillet.reconcile import appobservations, appstatus, statuses
from rillet.reconcile.appobservations import AppObservation, DriverObservation, InputObservation
from tests.unit import app_observations
from tests.unit.app_observations import LOST, NOW, SPARK_TAIL

IDLE_INPUTS = (InputObservation(name="clicks", topic="clicks", partitions=6, lag=0),)
READY = ("True", "False", "False")
_observe = app_observations.observe
_statuses = app_observations.condition_statuses


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
