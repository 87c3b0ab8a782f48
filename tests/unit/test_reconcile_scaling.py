"""Deciding an App's executor count from lag and partitions (pure).

Test plan:
- the cap: partitions // executorCores, at least 1, 0 (unknown) when partitions are unknown;
  the widest stage's tasks: the input partitions, or the state's partitions of a stateful query
  when they are more, and which of them binds;
- a driver starts with minExecutors within the cap, and with at most one executor while the cap
  is unknown;
- one decision, table-tested: the lag's count within min/max/cap, with the reason of each bound;
- stabilization: a lag dip does not scale down within the window; scaling up waits the short
  up-window; a raised cap applies in the same decision; the count never exceeds the cap;
- after an operator restart (no history) nothing scales down below the current count for a
  full window; unknown lag holds the count;
- history keeps only what a window still needs;
- a saw-tooth lag series scales once, not at every tooth;
- after a burst the count goes down in one step, not a staircase, and a scale-down waits at most
  the settle time for the lower counts the window already holds;
- spec.scaling maps onto the policy.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rillet.api.v1alpha1 import appresources
from rillet.reconcile import parallelisms, scaling, scalingdecisions, scalingreplays
from rillet.reconcile.scalingdecisions import Recommendation
from rillet.reconcile.scalingreplays import Sample

POLICY = scalingdecisions.ScalingPolicy(
    min_executors=1,
    max_executors=8,
    executor_cores=1,
    lag_target=1000,
    scale_down_window_seconds=60,
    scale_up_window_seconds=0,
)


def _policy(**changes: Any) -> scalingdecisions.ScalingPolicy:
    return dataclasses.replace(POLICY, **changes)


@pytest.mark.parametrize(
    ("partitions", "cores", "cap"),
    [(None, 1, 0), (0, 1, 0), (1, 1, 1), (12, 1, 12), (12, 4, 3), (13, 4, 3), (3, 4, 1)],
)
def test_cap_is_partitions_per_executor_cores(partitions: int | None, cores: int, cap: int) -> None:
    assert parallelisms.derive_cap(partitions, cores) == cap


@pytest.mark.parametrize(
    ("inputs", "state", "cores", "cap", "binding"),
    [
        (2, None, 1, 2, parallelisms.INPUT_PARTITIONS),  # stateless: the read is the only stage
        (6, 2, 1, 6, parallelisms.INPUT_PARTITIONS),  # an input grown past its state's partitions
        (2, 8, 1, 8, parallelisms.STATE_PARTITIONS),  # the stage after the shuffle is wider
        (2, 8, 4, 2, parallelisms.STATE_PARTITIONS),
        (4, 4, 1, 4, parallelisms.INPUT_PARTITIONS),
        (None, 8, 1, 0, None),  # inputs unknown: nothing known about the read stage
    ],
)
def test_cap_is_the_widest_stage_per_executor_cores(
    inputs: int | None, state: int | None, cores: int, cap: int, binding: str | None
) -> None:
    parallelism = parallelisms.Parallelism(input_partitions=inputs, state_partitions=state)

    assert parallelisms.parallelism_cap(parallelism, cores) == cap
    assert parallelism.binding == binding


def test_a_stateful_cap_says_the_state_partitions_bind() -> None:
    parallelism = parallelisms.Parallelism(input_partitions=2, state_partitions=4)
    decision = scaling.plan_executors(
        POLICY, partitions=parallelism, lag=50_000, history=(), current=None, now=1.0
    )

    assert (decision.desired, decision.cap, decision.cap_by) == (
        4,
        4,
        parallelisms.STATE_PARTITIONS,
    )
    assert decision.reason == scaling.CAPPED_BY_PARTITIONS
    assert "4 state partitions keep at most 4 busy" in decision.message


@pytest.mark.parametrize(
    ("min_executors", "cap", "starting"),
    [(3, 2, 2), (3, 6, 3), (0, 6, 0), (3, 0, 1), (0, 0, 0), (1, 0, 1)],
)
def test_a_driver_starts_within_the_cap(min_executors: int, cap: int, starting: int) -> None:
    assert scaling.starting_executors(_policy(min_executors=min_executors), cap) == starting


@pytest.mark.parametrize(
    ("lag", "target", "executors"), [(0, 1000, 0), (1, 1000, 1), (1000, 1000, 1), (1001, 1000, 2)]
)
def test_lag_asks_for_ceil_of_lag_over_target(lag: int, target: int, executors: int) -> None:
    assert scaling.raw_executors(lag, target) == executors


@pytest.mark.parametrize(
    ("policy", "partitions", "lag", "desired", "cap", "reason"),
    [
        (POLICY, 12, 3500, 4, 12, scaling.LAG_ABOVE_PER_EXECUTOR_TARGET),
        (POLICY, 12, 0, 1, 12, scaling.AT_MIN_EXECUTORS),
        (POLICY, 12, 1000, 1, 12, scaling.AT_MIN_EXECUTORS),
        (_policy(min_executors=0), 12, 0, 0, 12, scaling.AT_MIN_EXECUTORS),
        (POLICY, 12, 50_000, 8, 12, scaling.CAPPED_BY_MAX_EXECUTORS),
        (POLICY, 3, 50_000, 3, 3, scaling.CAPPED_BY_PARTITIONS),
        (POLICY, 8, 50_000, 8, 8, scaling.CAPPED_BY_MAX_EXECUTORS),
        (_policy(executor_cores=4), 12, 50_000, 3, 3, scaling.CAPPED_BY_PARTITIONS),
        (_policy(executor_cores=4), 2, 50_000, 1, 1, scaling.CAPPED_BY_PARTITIONS),
        (_policy(min_executors=4), 2, 0, 2, 2, scaling.CAPPED_BY_PARTITIONS),
        (_policy(min_executors=4), 12, 2500, 4, 12, scaling.AT_MIN_EXECUTORS),
        # Partitions unknown: one executor at most, whatever the lag or minExecutors asks.
        (POLICY, None, 50_000, 1, 0, scaling.CAP_UNKNOWN),
        (_policy(min_executors=3), None, 2500, 1, 0, scaling.CAP_UNKNOWN),
        (_policy(min_executors=0), None, 0, 0, 0, scaling.CAP_UNKNOWN),
        (POLICY, 12, None, 1, 12, scaling.LAG_UNKNOWN),
    ],
)
def test_first_decision_is_the_lag_count_within_bounds(
    policy: scalingdecisions.ScalingPolicy,
    partitions: int | None,
    lag: int | None,
    desired: int,
    cap: int,
    reason: str,
) -> None:
    decision = scaling.plan_executors(
        policy, partitions=partitions, lag=lag, history=(), current=None, now=100.0
    )

    assert (decision.desired, decision.cap, decision.reason) == (desired, cap, reason)
    assert decision.message


def _decide(
    *,
    lag: int | None,
    history: tuple[Recommendation, ...],
    current: int | None,
    now: float,
    partitions: int | None = 12,
    policy: scalingdecisions.ScalingPolicy = POLICY,
) -> scalingdecisions.ScalingDecision:
    return scaling.plan_executors(
        policy, partitions=partitions, lag=lag, history=history, current=current, now=now
    )


@pytest.mark.parametrize(
    ("history", "current", "lag", "desired", "reason"),
    [
        # 6 wanted 30 s ago, 2 now: hold 6 until the 60 s window has passed.
        ((Recommendation(70.0, 6),), 6, 2000, 6, scaling.SCALE_DOWN_STABILIZING),
        ((Recommendation(40.0, 6),), 6, 2000, 2, scaling.LAG_ABOVE_PER_EXECUTOR_TARGET),
        ((Recommendation(41.0, 6),), 6, 2000, 6, scaling.SCALE_DOWN_STABILIZING),
        # The highest in the window counts, not the newest of the past.
        ((Recommendation(50.0, 5), Recommendation(90.0, 3)), 6, 0, 5, "ScaleDownStabilizing"),
        # The window only keeps the count up: it never lifts it above the current count.
        ((Recommendation(90.0, 6),), 4, 2000, 4, scaling.SCALE_DOWN_STABILIZING),
    ],
)
def test_scale_down_waits_for_the_window(
    history: tuple[Recommendation, ...], current: int, lag: int, desired: int, reason: str
) -> None:
    decision = _decide(lag=lag, history=history, current=current, now=100.0)

    assert (decision.desired, decision.reason) == (desired, reason)


def test_scale_up_is_immediate_without_an_up_window() -> None:
    decision = _decide(lag=7000, history=(Recommendation(99.0, 2),), current=2, now=100.0)

    assert (decision.desired, decision.reason) == (7, scaling.LAG_ABOVE_PER_EXECUTOR_TARGET)


def test_scale_up_waits_for_the_up_window() -> None:
    policy = _policy(scale_up_window_seconds=5)
    history = (Recommendation(97.0, 2),)

    held = _decide(lag=7000, history=history, current=2, now=100.0, policy=policy)
    later = _decide(lag=7000, history=held.history, current=2, now=102.5, policy=policy)

    assert (held.desired, held.reason) == (2, scaling.SCALE_UP_STABILIZING)
    assert (later.desired, later.reason) == (7, scaling.LAG_ABOVE_PER_EXECUTOR_TARGET)


def test_up_window_scales_up_to_the_fewest_wanted_in_it() -> None:
    policy = _policy(scale_up_window_seconds=5)
    history = (Recommendation(96.0, 5), Recommendation(98.0, 9))

    decision = _decide(lag=7000, history=history, current=2, now=100.0, policy=policy)

    assert (decision.desired, decision.reason) == (5, scaling.SCALE_UP_STABILIZING)


def test_raised_cap_applies_at_once() -> None:
    # Lag wanted 8 all along; 3 partitions capped it at 3. The topic grows to 6 partitions.
    history = (Recommendation(90.0, 8), Recommendation(95.0, 8))
    policy = _policy(scale_up_window_seconds=10)

    decision = _decide(lag=8000, history=history, current=3, now=100.0, partitions=6, policy=policy)

    assert (decision.desired, decision.cap, decision.reason) == (6, 6, "CappedByPartitions")


def test_lowered_bound_applies_at_once_despite_the_window() -> None:
    # maxExecutors lowered from 8 to 2 while the window remembers 8.
    decision = _decide(
        lag=8000,
        history=(Recommendation(90.0, 8),),
        current=8,
        now=100.0,
        policy=_policy(max_executors=2),
    )

    assert (decision.desired, decision.reason) == (2, scaling.CAPPED_BY_MAX_EXECUTORS)


def test_the_operators_quota_bounds_max_executors_and_says_so() -> None:
    declared = appresources.Scaling.model_validate({"minExecutors": 10, "maxExecutors": 20})
    capped = scalingdecisions.policy_for(declared, quota=4)
    assert (capped.min_executors, capped.max_executors, capped.quota) == (4, 4, 4)
    assert (
        scalingdecisions.policy_for(declared, quota=50).quota is None
    )  # above maxExecutors: no bind
    assert scalingdecisions.policy_for(declared, quota=50).max_executors == 20
    decision = _decide(lag=50_000, history=(), current=None, now=100.0, policy=capped)
    assert (decision.desired, decision.reason) == (4, scaling.CAPPED_BY_QUOTA)
    assert "this operator allows 4 executors per App (apps.maxExecutorsPerApp)" in (
        decision.message
    )


@pytest.mark.parametrize("partitions", [1, 2, 5, 12])
def test_never_above_the_cap(partitions: int) -> None:
    history = tuple(Recommendation(float(t), 100) for t in range(50, 100))
    decision = _decide(lag=100_000, history=history, current=8, now=100.0, partitions=partitions)

    assert decision.desired == min(partitions, POLICY.max_executors)


def test_after_a_restart_nothing_scales_down_until_a_window_passed() -> None:
    restarted = _decide(lag=0, history=(), current=6, now=1000.0)
    during = _decide(lag=0, history=restarted.history, current=6, now=1059.0)
    after = _decide(lag=0, history=during.history, current=6, now=1060.0)

    assert (restarted.desired, restarted.reason) == (6, scaling.SCALE_DOWN_STABILIZING)
    assert during.desired == 6
    assert (after.desired, after.reason) == (1, scaling.AT_MIN_EXECUTORS)


def test_after_a_restart_scaling_up_waits_at_most_the_up_window() -> None:
    assert _decide(lag=7000, history=(), current=2, now=1000.0).desired == 7

    policy = _policy(scale_up_window_seconds=5)
    restarted = _decide(lag=7000, history=(), current=2, now=1000.0, policy=policy)
    later = _decide(lag=7000, history=restarted.history, current=2, now=1005.0, policy=policy)
    assert (restarted.desired, later.desired) == (2, 7)


def test_window_of_zero_scales_down_at_once_even_after_a_restart() -> None:
    policy = _policy(scale_down_window_seconds=0)

    decision = _decide(lag=0, history=(), current=6, now=1000.0, policy=policy)

    assert decision.desired == 1


@pytest.mark.parametrize(("current", "desired"), [(None, 1), (5, 5), (20, 8)])
def test_unknown_lag_holds_the_count_within_bounds(current: int | None, desired: int) -> None:
    decision = _decide(lag=None, history=(Recommendation(99.0, 3),), current=current, now=100.0)

    assert (decision.desired, decision.reason) == (desired, scaling.LAG_UNKNOWN)
    assert decision.history == (Recommendation(99.0, 3),)


def test_history_keeps_recommendations_inside_the_longest_window_and_the_newest() -> None:
    history = (Recommendation(10.0, 9), Recommendation(50.0, 4), Recommendation(95.0, 3))

    decision = _decide(lag=2000, history=history, current=4, now=100.0)

    assert decision.history == (
        Recommendation(50.0, 4),
        Recommendation(95.0, 3),
        Recommendation(100.0, 2),
    )


def test_history_keeps_only_the_newest_with_windows_of_zero() -> None:
    policy = _policy(scale_down_window_seconds=0)

    decision = _decide(
        lag=2000, history=(Recommendation(99.0, 3),), current=3, now=100.0, policy=policy
    )

    assert decision.history == (Recommendation(100.0, 2),)


def test_a_saw_tooth_lag_scales_once_not_at_every_tooth() -> None:
    # Offsets are committed after each 4 s batch: lag climbs to 6000 then drops to 500.
    samples = [Sample(at=2.0 * i, lag=6000 if i % 2 else 500, partitions=12) for i in range(60)]

    decisions = scalingreplays.replay(POLICY, samples)
    counts = [d.desired for d in decisions]

    assert counts[1:] == [6] * 59
    assert scalingreplays.count_scale_events(counts) == 1


def test_a_lasting_drop_scales_down_once_after_the_window() -> None:
    samples = [Sample(at=float(t), lag=6000 if t < 30 else 1500, partitions=12) for t in range(120)]

    counts = [d.desired for d in scalingreplays.replay(POLICY, samples)]

    # The last 6 was wanted at t=29: it leaves the 60 s window at t=89.
    assert counts[88] == 6
    assert counts[89] == 2
    assert scalingreplays.count_scale_events(counts) == 1


def test_after_a_burst_the_count_goes_down_in_one_step() -> None:
    # The burst's batch commits at t=34 (the lag then is what came meanwhile), the next at 36.
    policy = _policy(scale_down_window_seconds=30)
    lags = {34: 1610}
    samples = [
        Sample(at=float(t), lag=20_000 if t <= 32 else lags.get(t, 100), partitions=4)
        for t in range(0, 120, 2)
    ]

    decisions = scalingreplays.replay(policy, samples, current=1)
    counts = [d.desired for d in decisions]

    # The last 20 was wanted at t=32: the window lets go of it at t=62, and of the 2 at t=64.
    assert counts[:32] == [4] * 32
    assert (counts[31], decisions[31].reason) == (4, scaling.SCALE_DOWN_SETTLING)
    assert counts[32:] == [1] * 28
    assert scalingreplays.count_scale_events([1, *counts]) == 2


def test_settling_waits_at_most_the_settle_time_after_the_scale_down_is_due() -> None:
    # 8 wanted until t=9, then the lag falls by 1000 every 2 s: a staircase of recommendations.
    def lag(t: int) -> int:
        return 8000 if t < 10 else max(0, 8000 - 1000 * ((t - 8) // 2))

    samples = [Sample(at=float(t), lag=lag(t), partitions=12) for t in range(200)]

    counts = [d.desired for d in scalingreplays.replay(POLICY, samples, current=8)]

    # Due at 69 (the last 8 leaves the 60 s window), held 5 s for the lower counts to come.
    assert counts[73] == 8
    assert counts[74] == 5
    assert counts[80] == 2
    assert counts[81] == 1
    # Without settling the window would step down 8, 7, ..., 1 every 2 s.
    assert scalingreplays.count_scale_events(counts) == 3


@pytest.mark.parametrize(
    ("series", "events"), [([], 0), ([3], 0), ([3, 3, 3], 0), ([1, 2, 2, 1], 2), ([1, 4, 1, 4], 3)]
)
def test_count_scale_events(series: list[int], events: int) -> None:
    assert scalingreplays.count_scale_events(series) == events


def test_policy_from_spec_scaling() -> None:
    spec = appresources.Scaling(
        min_executors=2,
        max_executors=6,
        executor_cores=2,
        lag_target=500,
        stabilization_window_seconds=120,
    )

    assert scalingdecisions.policy_for(spec) == scalingdecisions.ScalingPolicy(
        min_executors=2,
        max_executors=6,
        executor_cores=2,
        lag_target=500,
        scale_down_window_seconds=120,
        scale_up_window_seconds=scalingdecisions.DEFAULT_SCALE_UP_WINDOW_SECONDS,
    )
