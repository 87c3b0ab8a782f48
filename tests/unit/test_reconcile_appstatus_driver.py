"""What an App's status says of its driver (pure): why it crashes, refuses to run, restarts or
waits, and how a driver on a lost node comes back.

Test plan:
- a crash loop's message is the last line of the driver's error (not Spark's shutdown log lines
  after it, table-tested), or without one the number of restarts;
- a lost checkpoint stalls the App from the first exit until the driver runs, also as `rillet
  drive` words it; a run spec of another contract version stalls it saying what to do; a schema
  registry's refusal stalls it with the registry's message;
- a restarting driver says why it restarts; a pending one says what it waits for (the
  scheduler and why it cannot place the pod, the kubelet of its node, its container);
- a driver on a lost node stalls the App and says how it comes back.
"""

from __future__ import annotations

import pytest

from rillet.driverapi import runspecs, terminations
from rillet.reconcile import appstatus, checkpointloss
from rillet.reconcile.appobservations import DriverObservation
from rillet.runtime.pod import terminating
from tests.unit import app_observations
from tests.unit.app_observations import LOST, NOW, SPARK_TAIL

_observe = app_observations.observe
_statuses = app_observations.condition_statuses


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


def test_a_driver_on_a_lost_node_stalls_the_app_and_says_how_it_comes_back() -> None:
    lost = DriverObservation(phase="Running", ready=False, node_name="n2", node_lost=True)
    status = appstatus.app_status(_observe(driver=lost), previous=None, now=NOW)
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert (status["phase"], _statuses(status)) == ("Failed", ("False", "False", "True"))
    assert stalled["reason"] == "DriverNodeLost"
    assert "node n2 is not Ready" in stalled["message"]
    assert "kubectl taint node n2 node.kubernetes.io/out-of-service" in stalled["message"]
