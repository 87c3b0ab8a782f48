"""Pure: what an App's stages run at once (`Parallelism`), and the executor cap that sets.

One task reads one input partition, one task updates one state partition: the widest stage's
tasks, per executor's cores, are the most executors an App keeps busy. A stateless query has
one stage, its read of the input partitions. A stateful one also has the stage after its
shuffle, with `spark.sql.shuffle.partitions` tasks, a count Spark freezes in the checkpoint at
the first start (the driver reports it). Used by the scaling decision (`scaling`), by the
objects a driver starts with (`appobjects`) and by the status (`appstatus`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

# What binds the cap (status.executors.capBy): the input's partitions or the state's.
INPUT_PARTITIONS: Final = "InputPartitions"
STATE_PARTITIONS: Final = "StatePartitions"


@dataclass(frozen=True, kw_only=True)
class Parallelism:
    """The tasks an App's stages run at once: its input partitions (all stream inputs), and for
    a stateful query its state's partitions (frozen in its checkpoint). None: not known."""

    input_partitions: int | None
    state_partitions: int | None = None

    @property
    def widest(self) -> int | None:
        """Tasks of the widest stage; None while the input partitions are unknown."""
        if not self.input_partitions:
            return None
        return max(self.input_partitions, self.state_partitions or 0)

    @property
    def binding(self) -> str | None:
        """Which count sets the widest stage (INPUT_PARTITIONS on a tie); None if unknown."""
        if not self.input_partitions:
            return None
        if (self.state_partitions or 0) > self.input_partitions:
            return STATE_PARTITIONS
        return INPUT_PARTITIONS


def derive_cap(total_partitions: int | None, executor_cores: int) -> int:
    """The most executors the partitions keep busy: partitions // cores, at least 1.

    0 when the partition count is unknown (None) or 0, meaning "no cap known".
    """
    if not total_partitions or total_partitions <= 0:
        return 0
    return max(1, total_partitions // executor_cores)


def total_partitions(counts: Iterable[int | None]) -> int | None:
    """The partitions of several topics together; None when there are none or any is unknown."""
    known = list(counts)
    if not known or any(count is None for count in known):
        return None
    return sum(count or 0 for count in known)


def parallelism_cap(parallelism: Parallelism, executor_cores: int) -> int:
    """The most executors the widest stage keeps busy (derive_cap of its tasks); 0: unknown."""
    return derive_cap(parallelism.widest, executor_cores)


def widest_phrase(parallelism: Parallelism) -> str:
    """ "6 partitions", or "2 state partitions" when the state's partitions set the widest stage."""
    if parallelism.binding == STATE_PARTITIONS:
        return f"{parallelism.state_partitions} state partitions"
    return f"{parallelism.input_partitions} partitions"
