"""The figures an App's status shows (pure): its executors (wanted, ready, capped, unschedulable,
by node, lost), its inputs' partitions and lag and their totals, its progress.

Test plan:
- executors no node fits are named in the progress, and with none ready the App is not Ready
  (ExecutorsUnschedulable) with the scheduler's reason;
- the cap says what binds it, and the state's partitions are shown;
- counts: executors, per-input partitions and lag, totals (partitions only when all known),
  lastBatchTime in RFC 3339 UTC, rowsPerSecond rounded; unset fields left out;
- executors by node, and those lost with their node, are in the status and the progress.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from rillet.api.v1alpha1 import apps
from rillet.reconcile import appobservations, appstatus
from rillet.reconcile.appobservations import AppObservation, InputObservation
from tests.unit import app_observations
from tests.unit.app_observations import NOW

_observe = app_observations.observe


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


def test_executors_by_node_and_lost_ones_are_in_the_status_and_the_progress() -> None:
    observation = _observe(executors_by_node=(("n1", 2),), executors_lost=1)
    status = appstatus.app_status(observation, previous=None, now=NOW)
    assert status["executors"]["nodes"] == [{"name": "n1", "running": 2}]
    assert status["executors"]["lost"] == 1
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert "(1 lost with their node)" in ready["message"]
    assert "lost" not in appstatus.app_status(_observe(), previous=None, now=NOW)["executors"]
