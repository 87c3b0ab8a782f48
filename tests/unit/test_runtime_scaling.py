"""Live executor scaling in the driver: the decisions, and the order of Spark calls.

Test plan:
- the start-up target is spark.executor.instances, else Spark's default (2) (the desired count
  itself is read from the driver pod: test_driverapi_desires);
- victims of a scale-down: idle executors first, newest first, then busy ones, newest first;
- the plan per (registered executors, target, desired): kill the excess and pin the target,
  raise or lower the target alone, or nothing (pods asked for may still be starting);
- killed executors Spark still lists are left out until they go, or for a grace period;
- the Scaler requests the start-up target once before anything else, so no kill can come
  first (a kill before any request sends Spark's target to 0), kills before pinning, never
  kills the same executor twice, and does nothing while the count is reached.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from rillet.runtime.pod import scaling


def ex(id_: str, active: int = 0) -> scaling.ExecutorState:
    return scaling.ExecutorState(id=id_, active_tasks=active)


@pytest.mark.parametrize(
    ("configured", "expected"), [("3", 3), ("0", 0), (None, 2), ("x", 2), ("-1", 0)]
)
def test_initial_target(configured: str | None, expected: int) -> None:
    assert scaling.initial_target(configured) == expected


@pytest.mark.parametrize(
    ("executors", "count", "victims"),
    [
        ([ex("1"), ex("2"), ex("3")], 1, ("3",)),
        ([ex("1"), ex("2", 1), ex("3", 2)], 1, ("1",)),
        ([ex("1"), ex("2", 1), ex("3", 2)], 2, ("1", "3")),
        ([ex("1", 1), ex("2", 1)], 1, ("2",)),
        ([ex("2"), ex("10"), ex("9")], 2, ("10", "9")),  # numeric order, not text order
        ([ex("1"), ex("2")], 0, ()),
        ([ex("1"), ex("2")], 5, ("2", "1")),
    ],
)
def test_victims_are_idle_first_then_newest(
    executors: list[scaling.ExecutorState], count: int, victims: tuple[str, ...]
) -> None:
    assert scaling.choose_victims(executors, count) == victims


@pytest.mark.parametrize(
    ("executors", "target", "desired", "expected"),
    [
        # scale up: raise the target; the new executors register later
        ([ex("1")], 1, 3, scaling.ScaleAction(total=3)),
        # asked for, still starting: nothing to do
        ([ex("1")], 3, 3, None),
        ([ex("1"), ex("2"), ex("3")], 3, 3, None),
        # scale down: kill the excess (idle first), then pin the target
        ([ex("1", 2), ex("2"), ex("3", 1)], 3, 1, scaling.ScaleAction(total=1, kill=("2", "3"))),
        ([ex("1"), ex("2")], 2, 0, scaling.ScaleAction(total=0, kill=("2", "1"))),
        # lower while pods are still pending: lowering the target is enough
        ([ex("1")], 4, 2, scaling.ScaleAction(total=2)),
        # more registered than the target (a replaced pod raced in): kill anyway
        ([ex("1"), ex("2"), ex("3")], 2, 2, scaling.ScaleAction(total=2, kill=("3",))),
        ([], 0, 0, None),
        ([], 2, 0, scaling.ScaleAction(total=0)),
    ],
)
def test_plan_scaling(
    executors: list[scaling.ExecutorState],
    target: int,
    desired: int,
    expected: scaling.ScaleAction | None,
) -> None:
    assert scaling.plan_scaling(executors=executors, target=target, desired=desired) == expected


def test_killed_executors_are_forgotten_once_gone_or_after_the_grace() -> None:
    killed = {"1": 100.0, "2": 100.0, "3": 50.0}

    pruned = scaling.prune_killed(killed, listed={"2", "3"}, now=120.0, grace=60.0)

    assert pruned == {"2": 100.0}


def test_a_scale_action_is_one_log_line() -> None:
    line = scaling.describe_action(
        scaling.ScaleAction(total=1, kill=("3", "2")), registered=3, target=3
    )
    assert line == "scaling executors: 3 registered (target 3) -> 1, killed 3, 2"
    assert "killed" not in scaling.describe_action(
        scaling.ScaleAction(total=4), registered=1, target=1
    )


class FakeExecutors:
    """Spark's executor calls, recorded; kills take effect at once (like Spark, in 0.03 s)."""

    def __init__(self, executors: list[scaling.ExecutorState], instances: str | None) -> None:
        self.executors = list(executors)
        self.instances = instances
        self.calls: list[tuple[str, Any]] = []
        self.listing_lags = False

    def configured_instances(self) -> str | None:
        return self.instances

    def registered(self) -> list[scaling.ExecutorState]:
        return list(self.executors)

    def request_total(self, total: int) -> bool:
        self.calls.append(("request", total))
        return True

    def kill(self, ids: Sequence[str]) -> bool:
        self.calls.append(("kill", tuple(ids)))
        if not self.listing_lags:
            self.executors = [e for e in self.executors if e.id not in ids]
        return True


def test_the_start_up_target_comes_before_any_kill() -> None:
    spark = FakeExecutors([ex("1"), ex("2"), ex("3")], instances="3")
    scaler = scaling.Scaler(spark)

    action = scaler.apply(1)

    assert action == scaling.ScaleAction(total=1, kill=("3", "2"))
    assert spark.calls == [("request", 3), ("kill", ("3", "2")), ("request", 1)]
    assert scaler.target == 1
    assert [e.id for e in scaler.registered] == ["1"]


def test_start_up_pins_once_and_a_reached_count_does_nothing() -> None:
    spark = FakeExecutors([ex("1"), ex("2")], instances=None)
    scaler = scaling.Scaler(spark)

    scaler.ensure_started()
    scaler.ensure_started()
    assert scaler.apply(2) is None

    assert spark.calls == [("request", 2)]


def test_scale_up_then_wait_for_registration() -> None:
    spark = FakeExecutors([ex("1")], instances="1")
    scaler = scaling.Scaler(spark)

    assert scaler.apply(3) == scaling.ScaleAction(total=3)
    assert scaler.apply(3) is None  # the two new executors are still starting
    spark.executors += [ex("2"), ex("3")]
    assert scaler.apply(3) is None

    assert spark.calls == [("request", 1), ("request", 3)]


def test_an_executor_killed_but_still_listed_is_not_killed_again() -> None:
    now = [0.0]
    spark = FakeExecutors([ex("1"), ex("2"), ex("3")], instances="3")
    spark.listing_lags = True
    scaler = scaling.Scaler(spark, clock=lambda: now[0], grace=60.0)

    scaler.apply(2)
    now[0] = 2.0
    again = scaler.apply(2)

    assert again is None
    assert spark.calls == [("request", 3), ("kill", ("3",)), ("request", 2)]
    assert [e.id for e in scaler.registered] == ["1", "2"]
    now[0] = 70.0  # the kill never took: the executor counts again
    assert scaler.apply(2) == scaling.ScaleAction(total=2, kill=("3",))
