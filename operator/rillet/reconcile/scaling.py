"""Pure: how many executors an App should run, from its Kafka lag and its input partitions.
The caller observes (lag, partitions, the count it last asked for) and keeps the history. What a
decision takes, keeps and returns is in `scalingdecisions`; `scalingreplays` replays samples.

The rule, per decision:
- the lag recommends `ceil(lag / lagTarget)` executors;
- like the HorizontalPodAutoscaler, a recommendation is stabilized over two windows: the count
  only goes down to the highest recommendation of the scale-down window (a dip in lag, such as
  the saw-tooth of offsets committed after each micro-batch, does not flap executors), and only
  goes up to the lowest recommendation of the scale-up window (none by default: at once);
- a scale-down that the window would follow with a lower count within SCALE_DOWN_SETTLE_SECONDS
  waits for it (at most that long after it became due): one step down, not a staircase;
- then the bounds apply at once: minExecutors, maxExecutors, and the cap: the tasks the App's
  widest stage runs at once, per executor's cores (one task reads one input partition, one task
  updates one state partition, so more cores than that sit idle). History holds recommendations
  before the bounds, so a raised cap (partitions grew) or a changed min/max takes effect in the
  same decision, and the count is never above the cap.

The widest stage: a stateless query has one, its read of the input partitions. A stateful one
also has the stage after its shuffle, with `spark.sql.shuffle.partitions` tasks, a count Spark
freezes in the checkpoint at the first start (the driver reports it: `parallelisms`). An input
grown past the state's partitions widens the read only: the executors past the state's
partitions read and pre-aggregate, and sit idle while the state is updated (the status says so).
While the cap is unknown (Kafka not read yet, nothing known from before) at most
UNKNOWN_CAP_EXECUTORS run: never one executor past the partitions, not even at start.

After an operator restart the history is empty: the count last asked for counts as recommended
now, so nothing scales down before a full window (a scale-up waits the scale-up window).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from rillet.reconcile import parallelisms
from rillet.reconcile.scalingdecisions import Recommendation, ScalingDecision, ScalingPolicy

# A scale-down due now waits this long at most for a lower count the scale-down window already
# holds: after a burst the lag falls in steps (the burst's batch commits, then the records that
# came meanwhile), and 4 -> 2 -> 1 within 3 s (measured) is two kills where one does.
SCALE_DOWN_SETTLE_SECONDS: Final = 5.0

# Reasons of a decision (CamelCase, as condition and Event reasons).
LAG_ABOVE_PER_EXECUTOR_TARGET: Final = "LagAbovePerExecutorTarget"
CAPPED_BY_PARTITIONS: Final = "CappedByPartitions"
CAPPED_BY_MAX_EXECUTORS: Final = "CappedByMaxExecutors"
CAPPED_BY_QUOTA: Final = "CappedByQuota"
SCALE_DOWN_STABILIZING: Final = "ScaleDownStabilizing"
SCALE_DOWN_SETTLING: Final = "ScaleDownSettling"
SCALE_UP_STABILIZING: Final = "ScaleUpStabilizing"
AT_MIN_EXECUTORS: Final = "AtMinExecutors"
LAG_UNKNOWN: Final = "LagUnknown"
CAP_UNKNOWN: Final = "PartitionsUnknown"

# Executors an App may run while its cap is unknown: one, which no topic has fewer partitions
# than, rather than minExecutors, which may be more than the topics have (KEDA and Flink's
# autoscaler likewise never scale a source past a partition count they have not read).
UNKNOWN_CAP_EXECUTORS: Final = 1


def starting_executors(policy: ScalingPolicy, cap: int) -> int:
    """The executors a driver starts with, before any scaling decision reaches it: minExecutors
    within the cap (at most UNKNOWN_CAP_EXECUTORS while it is unknown, 0 if minExecutors is)."""
    return _bounds(policy, cap).lower


def raw_executors(lag: int, lag_target: int) -> int:
    """Executors the lag asks for: ceil(lag / lagTarget), 0 without lag."""
    return -(-max(lag, 0) // lag_target)


@dataclass(frozen=True)
class _Bounds:
    lower: int
    upper: int


def _bounds(policy: ScalingPolicy, cap: int) -> _Bounds:
    # The cap lowers the minimum too: executors beyond the partitions would only sit idle.
    upper = min(policy.max_executors, cap or UNKNOWN_CAP_EXECUTORS)
    return _Bounds(lower=min(policy.min_executors, upper), upper=upper)


def _clamp(value: int, bounds: _Bounds) -> int:
    return max(bounds.lower, min(value, bounds.upper))


def _recent(history: Iterable[Recommendation], *, now: float, seconds: float) -> list[int]:
    """Recommendations younger than `seconds` (none for a window of 0)."""
    return [r.executors for r in history if now - r.at < seconds]


def _seeded(
    history: tuple[Recommendation, ...], current: int | None, now: float
) -> tuple[Recommendation, ...]:
    """The history, or after a restart (none kept) the count last asked for as if wanted now."""
    if history or current is None:
        return history
    return (Recommendation(at=now, executors=current),)


def stabilize(
    policy: ScalingPolicy,
    *,
    newest: int,
    past: Sequence[Recommendation],
    current: int | None,
    now: float,
) -> int:
    """The count between the scale-up floor and the scale-down ceiling closest to `current`.

    The floor is the fewest executors wanted over the scale-up window, the ceiling the most
    wanted over the scale-down window (both including `newest`). Without a current count (the
    first decision) the newest recommendation stands.
    """
    if current is None:
        return newest
    floor = min([newest, *_recent(past, now=now, seconds=policy.scale_up_window_seconds)])
    ceiling = max([newest, *_recent(past, now=now, seconds=policy.scale_down_window_seconds)])
    return min(max(current, floor), ceiling)


def _trimmed(
    policy: ScalingPolicy,
    past: tuple[Recommendation, ...],
    newest: Recommendation | None,
    now: float,
) -> tuple[Recommendation, ...]:
    """What the next decision needs: recommendations still inside a window, and the newest."""
    down = policy.scale_down_window_seconds
    # When a scale-down became due is read from the last recommendation that kept the count up,
    # until the settle time after it left the window.
    longest = max(down + SCALE_DOWN_SETTLE_SECONDS if down else 0.0, policy.scale_up_window_seconds)
    kept = tuple(r for r in past if now - r.at < longest)
    return (*kept, newest) if newest is not None else kept


def plan_executors(
    policy: ScalingPolicy,
    *,
    partitions: int | parallelisms.Parallelism | None,
    lag: int | None,
    history: tuple[Recommendation, ...],
    current: int | None,
    now: float,
) -> ScalingDecision:
    """The executor count for the App now.

    `partitions`: the App's `parallelisms.Parallelism`, or the total partitions of its stream
    inputs (None: unknown). `lag`: total records behind (None: unknown; the count then holds).
    `history`: the previous decision's history (empty after an operator restart). `current`:
    the count last asked for (status executors.desired), None if never. `now`: seconds on a
    monotonic clock.
    """
    parallelism = (
        partitions
        if isinstance(partitions, parallelisms.Parallelism)
        else parallelisms.Parallelism(input_partitions=partitions)
    )
    cap = parallelisms.parallelism_cap(parallelism, policy.executor_cores)
    bounds = _bounds(policy, cap)
    past = _seeded(history, current, now)
    if lag is None:
        step = _hold(bounds=bounds, current=current)
    elif not cap:
        step = _uncapped(policy, bounds=bounds, lag=lag, now=now)
    else:
        step = _follow(
            policy,
            bounds=bounds,
            parallelism=parallelism,
            cap=cap,
            past=past,
            lag=lag,
            current=current,
            now=now,
        )
    return ScalingDecision(
        desired=step.desired,
        cap=cap,
        reason=step.reason,
        message=step.message,
        history=_trimmed(policy, past, step.newest, now),
        cap_by=parallelism.binding,
    )


@dataclass(frozen=True)
class _Step:
    """A decision short of its history: the count, why, and the recommendation it records."""

    desired: int
    reason: str
    message: str
    newest: Recommendation | None = None


def _hold(*, bounds: _Bounds, current: int | None) -> _Step:
    """Nothing new to go by: hold the count (within today's bounds), record nothing."""
    desired = _clamp(bounds.lower if current is None else current, bounds)
    return _Step(desired, LAG_UNKNOWN, f"lag not known yet: keeping {desired} executors")


def _uncapped(policy: ScalingPolicy, *, bounds: _Bounds, lag: int, now: float) -> _Step:
    """Lag without partitions (not seen together in practice): no count past what is safe."""
    newest = Recommendation(at=now, executors=raw_executors(lag, policy.lag_target))
    message = f"partitions not known yet: at most {bounds.upper} executors until they are"
    return _Step(_clamp(newest.executors, bounds), CAP_UNKNOWN, message, newest)


def _follow(
    policy: ScalingPolicy,
    *,
    bounds: _Bounds,
    parallelism: parallelisms.Parallelism,
    cap: int,
    past: tuple[Recommendation, ...],
    lag: int,
    current: int | None,
    now: float,
) -> _Step:
    """The lag's recommendation, stabilized and bounded; a scale-down that settles waits."""
    raw = raw_executors(lag, policy.lag_target)
    newest = Recommendation(at=now, executors=raw)
    stable = stabilize(policy, newest=raw, past=past, current=current, now=now)
    desired = _clamp(stable, bounds)
    if current is not None and _settles(
        policy, (*past, newest), bounds=bounds, current=current, desired=desired, now=now
    ):
        desired = _clamp(current, bounds)
        message = (
            f"lag of {lag} records needs {raw} executors at lagTarget {policy.lag_target}; "
            f"keeping {desired} a few seconds more, for one step down"
        )
        return _Step(desired, SCALE_DOWN_SETTLING, message, newest)
    reason, message = _explain(
        policy, cap=cap, bounds=bounds, parallelism=parallelism, lag=lag, raw=raw, desired=desired
    )
    return _Step(desired, reason, message, newest)


def _settles(
    policy: ScalingPolicy,
    recommendations: Sequence[Recommendation],
    *,
    bounds: _Bounds,
    current: int,
    desired: int,
    now: float,
) -> bool:
    """Whether a scale-down to `desired` waits: it became due less than SCALE_DOWN_SETTLE_SECONDS
    ago, and with no new recommendation the window would lower the count again by then."""
    if desired >= _clamp(current, bounds):
        return False
    window = policy.scale_down_window_seconds
    kept_up = [r.at for r in recommendations if r.executors >= current]
    if not window or not kept_up:
        return False
    if now - (max(kept_up) + window) >= SCALE_DOWN_SETTLE_SECONDS:
        return False
    later = [
        r.executors for r in recommendations if r.at > now + SCALE_DOWN_SETTLE_SECONDS - window
    ]
    return _clamp(max(later, default=0), bounds) < desired


def _explain(
    policy: ScalingPolicy,
    *,
    cap: int,
    bounds: _Bounds,
    parallelism: parallelisms.Parallelism,
    lag: int,
    raw: int,
    desired: int,
) -> tuple[str, str]:
    """The reason and message of a decision: what held the count where it is."""
    wanted = _clamp(raw, bounds)
    needs = f"lag of {lag} records needs {raw} executors at lagTarget {policy.lag_target}"
    if desired > wanted:
        window = policy.scale_down_window_seconds
        return SCALE_DOWN_STABILIZING, f"{needs}; keeping {desired}, wanted within {window:g}s"
    if desired < wanted:
        window = policy.scale_up_window_seconds
        return SCALE_UP_STABILIZING, f"{needs}; {desired} until wanted for {window:g}s"
    by_partitions = f"{needs}; {parallelisms.widest_phrase(parallelism)} keep at most {cap} busy"
    if raw > bounds.upper:
        if cap and cap < policy.max_executors:
            return CAPPED_BY_PARTITIONS, f"{by_partitions} at {policy.executor_cores} cores each"
        if policy.quota is not None:
            quota = f"{policy.quota} executors per App (apps.maxExecutorsPerApp)"
            return CAPPED_BY_QUOTA, f"{needs}; this operator allows {quota}"
        return CAPPED_BY_MAX_EXECUTORS, f"{needs}; maxExecutors is {policy.max_executors}"
    if raw <= bounds.lower:
        if bounds.lower < policy.min_executors:
            return CAPPED_BY_PARTITIONS, f"{by_partitions}, below minExecutors"
        return AT_MIN_EXECUTORS, f"{needs}; minExecutors is {policy.min_executors}"
    return LAG_ABOVE_PER_EXECUTOR_TARGET, needs
