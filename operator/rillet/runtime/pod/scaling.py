"""Live executor scaling from inside the driver: what to ask Spark for, and asking it.

The operator writes the executor count it wants onto the driver pod (the
`rillet.io/executors-desired` annotation, `driverapi.desires`); the driver's in-cluster loop
(`incluster`) reads it and hands it to a `Scaler`. Spark's developer
API (reached through py4j) has traps, verified on Kubernetes with Spark 4.2:
- the target (`requestTotalExecutors`) only ever adds pods, it never removes a running executor;
- `killExecutors(ids)` removes those executors and lowers the target by one each, but a kill
  before any `requestTotalExecutors` in the application's life sets the target to 0;
so the sequence is: once at start-up request the configured count (the target is then known),
to scale up request the new total, to scale down kill that many executors (idle ones first,
then the newest) and request the new total to pin the target.

`plan_scaling` and its helpers are purely computational, no side-effects; `SparkExecutors` is
the thin py4j wrapper; `Scaler` applies the plans and remembers the target and the executors it
has killed but Spark still lists.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pyspark only at run time, from inside a running driver
    from pyspark import SparkContext

log = logging.getLogger(__name__)

# Spark's default executor count on a cluster manager without dynamic allocation.
DEFAULT_INSTANCES = 2
# A killed executor Spark still lists after this long is considered again (the kill failed).
KILL_GRACE_SECONDS = 60.0
DRIVER_ID = "driver"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExecutorState:
    """A registered executor and the tasks it runs now."""

    id: str
    active_tasks: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScaleAction:
    """What to ask Spark: kill these executors (first), then set the target to `total`."""

    total: int
    kill: tuple[str, ...] = ()


def initial_target(configured: str | None) -> int:
    """The target Spark starts with: `spark.executor.instances`, else Spark's default."""
    try:
        return max(0, int(configured)) if configured is not None else DEFAULT_INSTANCES
    except ValueError:
        return DEFAULT_INSTANCES


def _age_key(executor: ExecutorState) -> tuple[int, int | str]:
    """Ordering by age: Spark numbers executors 1, 2, ... as they are added."""
    return (0, int(executor.id)) if executor.id.isdigit() else (1, executor.id)


def choose_victims(executors: Iterable[ExecutorState], count: int) -> tuple[str, ...]:
    """The `count` executors to kill: idle ones (no active task) first, newest first."""
    if count <= 0:
        return ()
    newest_first = sorted(executors, key=_age_key, reverse=True)
    ranked = [e for e in newest_first if e.active_tasks == 0] + [
        e for e in newest_first if e.active_tasks != 0
    ]
    return tuple(e.id for e in ranked[:count])


def plan_scaling(
    *, executors: Collection[ExecutorState], target: int, desired: int
) -> ScaleAction | None:
    """What to do to run `desired` executors, given those registered and Spark's target.

    More registered than desired: kill the excess (the target alone never removes one). A
    target that differs from desired (scaling up, or pods still pending) is set to desired.
    None: nothing to do (pods asked for may still be starting).
    """
    kill = choose_victims(executors, len(executors) - desired)
    if not kill and target == desired:
        return None
    return ScaleAction(total=desired, kill=kill)


def prune_killed(
    killed: Mapping[str, float], *, listed: Collection[str], now: float, grace: float
) -> dict[str, float]:
    """The killed executors (id: when) Spark still lists, within the grace period."""
    return {i: at for i, at in killed.items() if i in listed and now - at < grace}


def describe_action(action: ScaleAction, *, registered: int, target: int) -> str:
    """One log line for a scale action: from, to, killed ids."""
    killed = f", killed {', '.join(action.kill)}" if action.kill else ""
    return f"scaling executors: {registered} registered (target {target}) -> {action.total}{killed}"


class ExecutorControl(Protocol):
    """Spark's executor calls, as the Scaler uses them (SparkExecutors; fakes in tests)."""

    def configured_instances(self) -> str | None: ...
    def registered(self) -> list[ExecutorState]: ...
    def request_total(self, total: int) -> bool: ...
    def kill(self, ids: Sequence[str]) -> bool: ...


class SparkExecutors:
    """The executor calls of a SparkContext, through py4j (developer API of SparkContext)."""

    def __init__(self, sc: SparkContext) -> None:
        self._sc = sc
        java_context: Any = sc._jsc  # a JavaSparkContext while sc runs (typed Optional)
        jvm: Any = sc._jvm
        self._jsc: Any = java_context.sc()
        self._utils: Any = jvm.org.apache.spark.api.python.PythonUtils
        self._converters: Any = jvm.scala.jdk.javaapi.CollectionConverters

    def configured_instances(self) -> str | None:
        """`spark.executor.instances` as set (None: Spark's default)."""
        value = self._sc.getConf().get("spark.executor.instances")
        return None if value is None else str(value)

    def registered(self) -> list[ExecutorState]:
        """Executors registered now, from the status store (no HTTP), the driver left out."""
        summaries = self._converters.asJava(self._jsc.statusStore().executorList(True))
        return [
            ExecutorState(id=str(s.id()), active_tasks=int(s.activeTasks()))
            for s in summaries
            if s.isActive() and str(s.id()) != DRIVER_ID
        ]

    def request_total(self, total: int) -> bool:
        """Set the executor target (adds pods; never removes a running executor)."""
        empty = self._utils.toScalaMap({})
        return bool(self._jsc.requestTotalExecutors(total, 0, empty))

    def kill(self, ids: Sequence[str]) -> bool:
        """Remove these executors (the target drops by one each)."""
        return bool(self._jsc.killExecutors(self._utils.toSeq(list(ids))))


class Scaler:
    """Applies the desired executor count to a running SparkContext, one `apply` at a time."""

    def __init__(
        self,
        executors: ExecutorControl,
        *,
        clock: Callable[[], float] = time.monotonic,
        grace: float = KILL_GRACE_SECONDS,
    ) -> None:
        self._executors = executors
        self._clock = clock
        self._grace = grace
        self._killed: dict[str, float] = {}
        self._started = False
        self.target = initial_target(executors.configured_instances())
        self.registered: list[ExecutorState] = []

    def ensure_started(self) -> None:
        """Once: set the target Spark has anyway, so that a later kill can never drop it to 0."""
        if self._started:
            return
        accepted = self._executors.request_total(self.target)
        self._started = True
        log.info("executor target %d at start-up (accepted: %s)", self.target, accepted)

    def observe(self) -> list[ExecutorState]:
        """Read the registered executors; those killed and not gone yet are left out."""
        listed = self._executors.registered()
        self._killed = prune_killed(
            self._killed, listed={e.id for e in listed}, now=self._clock(), grace=self._grace
        )
        self.registered = [e for e in listed if e.id not in self._killed]
        return self.registered

    def apply(self, desired: int) -> ScaleAction | None:
        """Bring Spark towards `desired` executors; returns what was done, if anything."""
        self.ensure_started()
        executors = self.observe()
        action = plan_scaling(executors=executors, target=self.target, desired=desired)
        if action is None:
            return None
        log.info(describe_action(action, registered=len(executors), target=self.target))
        if action.kill:
            if self._executors.kill(action.kill):
                now = self._clock()
                self._killed.update(dict.fromkeys(action.kill, now))
                self.registered = [e for e in executors if e.id not in self._killed]
            else:
                log.warning("Spark refused to kill executors %s", ", ".join(action.kill))
        if not self._executors.request_total(action.total):
            log.warning("Spark refused the executor target %d", action.total)
        self.target = action.total
        return action
