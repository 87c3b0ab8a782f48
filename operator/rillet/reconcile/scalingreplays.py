"""Pure: a policy replayed over a series of samples, each decided by `scaling.plan_executors` as
the scaling loop would decide it, and the scale events of a series of counts (flapping shows as
many): for tests and benchmarks, not the operator.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from rillet.reconcile import scaling
from rillet.reconcile.scalingdecisions import Recommendation, ScalingDecision, ScalingPolicy


@dataclass(frozen=True)
class Sample:
    """One observation of a replay: when, total lag, total partitions."""

    at: float
    lag: int | None
    partitions: int | None


def replay(
    policy: ScalingPolicy, samples: Iterable[Sample], *, current: int | None = None
) -> list[ScalingDecision]:
    """The decisions of a series of samples, each fed the previous one's count and history
    (as the operator does); for tests and benchmarks."""
    decisions: list[ScalingDecision] = []
    history: tuple[Recommendation, ...] = ()
    for sample in samples:
        decision = scaling.plan_executors(
            policy,
            partitions=sample.partitions,
            lag=sample.lag,
            history=history,
            current=current,
            now=sample.at,
        )
        decisions.append(decision)
        history, current = decision.history, decision.desired
    return decisions


def count_scale_events(series: Iterable[int]) -> int:
    """How many times a series of executor counts changes value (flapping shows as many)."""
    return sum(1 for before, after in itertools.pairwise(series) if before != after)
