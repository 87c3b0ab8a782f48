"""Pure: what an App's scaling decision takes, keeps and returns, between the scaling loop
(`apptargets`, `handlers.appscaling`) and the rule that decides (`scaling.plan_executors`):
- the policy it follows (`ScalingPolicy`): spec.scaling within the operator's quota of executors
  per App (`policy_for`), with the scale-up window's default;
- the recommendations it keeps for the next decision (`Recommendation`; the caller holds them);
- the decision (`ScalingDecision`): the count, its cap, why (one of `scaling`'s reasons), and
  the history to pass on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rillet.api.v1alpha1 import appresources

# The scale-up window: none, as the HorizontalPodAutoscaler's default. An executor takes seconds
# to start (5 to 8 s from its pod's start to taking tasks on the 2-core node) and a burst's lag
# is what the App is for: a 5 s window made a burst wait 5 s more for its executors. The price:
# the count follows the peaks of the lag's saw-tooth (high just before each batch commits its
# offsets), which the scale-down window then keeps, where a window would hold it at the troughs.
# The peaks are records waiting too: at worst an executor more, held for the scale-down window.
DEFAULT_SCALE_UP_WINDOW_SECONDS: Final = 0.0


@dataclass(frozen=True, kw_only=True)
class ScalingPolicy:
    """The bounds and windows of one App's scaling (from spec.scaling)."""

    min_executors: int
    max_executors: int
    executor_cores: int
    lag_target: int
    scale_down_window_seconds: float
    scale_up_window_seconds: float = DEFAULT_SCALE_UP_WINDOW_SECONDS
    quota: int | None = None  # the operator's cap on an App's executors, when below the App's


@dataclass(frozen=True)
class Recommendation:
    """What the lag asked for at one moment: executors before any bound, at `at` seconds."""

    at: float
    executors: int


@dataclass(frozen=True, kw_only=True)
class ScalingDecision:
    """The executor count to ask for, why, and the history to pass to the next decision.

    `cap` is the cap of the widest stage (0 while unknown: at most UNKNOWN_CAP_EXECUTORS run);
    `cap_by` says which partitions set it (INPUT_PARTITIONS, STATE_PARTITIONS; None: unknown)."""

    desired: int
    cap: int
    reason: str
    message: str
    history: tuple[Recommendation, ...]
    cap_by: str | None = None


def policy_for(
    scaling: appresources.Scaling,
    *,
    quota: int | None = None,
    scale_up_window_seconds: float = DEFAULT_SCALE_UP_WINDOW_SECONDS,
) -> ScalingPolicy:
    """The policy of an App's spec.scaling (stabilizationWindowSeconds: the scale-down window),
    within the operator's `quota` of executors per App."""
    binding = quota if quota is not None and quota < scaling.max_executors else None
    return ScalingPolicy(
        min_executors=min(scaling.min_executors, binding or scaling.min_executors),
        max_executors=binding or scaling.max_executors,
        quota=binding,
        executor_cores=scaling.executor_cores,
        lag_target=scaling.lag_target,
        scale_down_window_seconds=scaling.stabilization_window_seconds,
        scale_up_window_seconds=scale_up_window_seconds,
    )
