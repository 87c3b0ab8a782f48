"""Pure: whether an App may start when the checkpoint of a Table it writes is gone.

Spark starts a query whose checkpoint holds no offsets from its inputs' startingOffsets, with
empty state. For an aggregation into a Table that already holds data, that silently replaces
correct values with counts restarted from whatever the inputs still retain. So the driver
checks, before it starts anything, each Table output: a checkpoint without offsets while the
Table's topic holds records is a lost checkpoint, and `checkpoint.onLoss` decides:

- Stall (the default): start nothing; the driver ends with `CheckpointLostError: ...`, which
  the operator shows as the App's Stalled condition, reason CheckpointLost;
- Recompute: read every input from its earliest offset, but only when that is the whole
  history: every partition still starts at offset 0 and no input topic is compacted;
  otherwise stall, naming what was deleted;
- StartFresh: start as a new App would (startingOffsets), overwriting the Table's keys.

A checkpoint that holds offsets is never in question, so restoring it is always a way out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rillet.api.v1alpha1 import appresources

# Partitions named per topic in a message; a termination message holds 1,024 characters.
NAMED_PARTITIONS = 3
UNTOUCHED = "nothing was started and the Table is untouched"
WAYS_OUT = (
    "restore the checkpoint, or set checkpoint.onLoss to Recompute (read the inputs from their "
    "earliest offsets; needs their whole history) or StartFresh (start from startingOffsets and "
    "overwrite the Table)"
)


class CheckpointLostError(RuntimeError):
    """A Table output's checkpoint holds no offsets while the Table holds data, and
    checkpoint.onLoss says not to start. The driver's termination message starts with this
    class's name, which is how the operator tells this failure from others."""


@dataclass(frozen=True, kw_only=True)
class LostTable:
    """A Table output whose checkpoint holds no offsets while its topic holds records."""

    output_id: str
    topic: str
    checkpoint: str  # the directory whose offsets/ was looked for


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
    policy: appresources.CheckpointLossPolicy,
    lost: Sequence[LostTable],
    histories: Sequence[InputHistory],
) -> Decision:
    """What the driver does, given the lost Table checkpoints and its inputs' history.

    A refusal's message says what to do first: a termination message may be cut at its end.
    """
    if not lost:
        return START
    if policy == "StartFresh":
        return START
    if policy == "Recompute":
        gaps = history_gaps(histories)
        if not gaps:
            return Decision(start=True, from_earliest=True)
        return Decision(
            start=False,
            problem=f"{UNTOUCHED}: checkpoint.onLoss is Recompute, but the inputs no longer hold "
            f"their whole history ({'; '.join(gaps)}); restore the checkpoint, or set "
            f"checkpoint.onLoss: StartFresh to overwrite the Table. {describe(lost)}",
        )
    return Decision(start=False, problem=f"{UNTOUCHED}: {WAYS_OUT}. {describe(lost)}")


def describe(lost: Sequence[LostTable]) -> str:
    """The lost checkpoints in words."""
    return " ".join(
        f"Lost: the checkpoint of {t.output_id} ({t.checkpoint}) holds no offsets while topic "
        f"{t.topic} holds records."
        for t in lost
    )


def history_gaps(histories: Sequence[InputHistory]) -> list[str]:
    """Why the inputs do not hold their whole history: one phrase per topic that lost some."""
    gaps: list[str] = []
    for history in histories:
        if history.compacted:
            gaps.append(f"topic {history.topic} is compacted")
            continue
        trimmed = [(p, o) for p, o in sorted(history.first_offsets.items()) if o > 0]
        if trimmed:
            named = ", ".join(
                f"partition {p} starts at offset {o}" for p, o in trimmed[:NAMED_PARTITIONS]
            )
            more = len(trimmed) - NAMED_PARTITIONS
            gaps.append(
                f"topic {history.topic}: {named}"
                + (f" and {more} more partitions" if more > 0 else "")
            )
    return gaps
