"""Pure: whether an App may start when the checkpoint of a Table it writes is gone.

Spark starts a query whose checkpoint holds no offsets from its inputs' startingOffsets, with
empty state. For an aggregation into a Table that already holds data, that silently replaces
correct values with counts restarted from whatever the inputs still retain. So the driver
checks, before it starts anything, each Table output: a checkpoint without offsets while the
Table's topic holds records is a lost checkpoint, and `checkpoint.onLoss` decides:

- Stall (the default): start nothing; the driver ends with `CheckpointLost: ...`, which the
  operator shows as the App's Stalled condition with that reason;
- Recompute: read every input from its earliest offset, but only when that is the whole
  history: every partition still starts at offset 0 and no input topic is compacted;
  otherwise stall, naming what was deleted;
- StartFresh: start as a new App would (startingOffsets), overwriting the Table's keys.

A checkpoint that holds offsets is never in question, so restoring it is always a way out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rillet.api.v1alpha1 import apps


@dataclass(frozen=True, kw_only=True)
class LostTable:
    """A Table output whose checkpoint holds no offsets while its topic holds records."""

    output_id: str
    topic: str
    records: int  # records between the low and high watermarks, over all partitions


@dataclass(frozen=True, kw_only=True)
class InputHistory:
    """What an input topic still holds of its past."""

    topic: str
    compacted: bool
    first_offsets: Mapping[int, int]  # partition -> earliest offset retained


@dataclass(frozen=True, kw_only=True)
class Decision:
    """Start (from the earliest offsets when `from_earliest`), or refuse with `problem`."""

    start: bool
    from_earliest: bool = False
    problem: str | None = None


START = Decision(start=True)


def decide(
    policy: apps.CheckpointLossPolicy,
    lost: Sequence[LostTable],
    histories: Sequence[InputHistory],
) -> Decision:
    """What the driver does, given the lost Table checkpoints and its inputs' history."""
    if not lost:
        return START
    if policy == "StartFresh":
        return START
    what = describe(lost)
    if policy == "Recompute":
        gaps = history_gaps(histories)
        if not gaps:
            return Decision(start=True, from_earliest=True)
        return Decision(
            start=False,
            problem=f"{what}; checkpoint.onLoss is Recompute, but the inputs no longer hold their "
            f"whole history ({'; '.join(gaps)}): restore the checkpoint, or set "
            f"checkpoint.onLoss: StartFresh to overwrite the Table",
        )
    return Decision(
        start=False,
        problem=f"{what}; nothing was started and the Table is untouched. Restore the "
        f"checkpoint, or set checkpoint.onLoss to Recompute (read the inputs from their earliest "
        f"offsets; needs their whole history) or StartFresh (start from startingOffsets and "
        f"overwrite the Table)",
    )


def describe(lost: Sequence[LostTable]) -> str:
    """The lost checkpoints in words."""
    tables = ", ".join(f"{t.output_id} ({t.records} records in topic {t.topic})" for t in lost)
    return f"the checkpoint holds no offsets for {tables}"


def history_gaps(histories: Sequence[InputHistory]) -> list[str]:
    """Why the inputs do not hold their whole history: one phrase per topic that lost some."""
    gaps: list[str] = []
    for history in histories:
        if history.compacted:
            gaps.append(f"topic {history.topic} is compacted")
            continue
        trimmed = {p: o for p, o in sorted(history.first_offsets.items()) if o > 0}
        if trimmed:
            starts = ", ".join(f"partition {p} starts at offset {o}" for p, o in trimmed.items())
            gaps.append(f"topic {history.topic}: {starts}")
    return gaps
