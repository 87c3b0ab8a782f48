"""Whether an App may start when a Table output's checkpoint is gone (pure).

Test plan:
- nothing lost: start, whatever the policy;
- Stall (the default) refuses, saying first the three ways out (a termination message may be
  cut at its end), then which checkpoint directory holds no offsets;
- Recompute starts from the earliest offsets only when every input holds its whole history; a
  compacted input or a partition that no longer starts at offset 0 refuses, naming each gap (at
  most three partitions per topic, then how many more);
- StartFresh starts from startingOffsets.
"""

from __future__ import annotations

from rillet.reconcile import checkpointloss
from rillet.reconcile.checkpointloss import InputHistory, LostTable

LOST = (LostTable(output_id="table-counts", topic="counts", checkpoint="/ck/outputs/table-counts"),)
WHOLE = (InputHistory(topic="words", compacted=False, first_offsets={0: 0, 1: 0}),)


def test_nothing_lost_starts_whatever_the_policy() -> None:
    for policy in ("Stall", "Recompute", "StartFresh"):
        assert checkpointloss.decide(policy, (), ()) == checkpointloss.START


def test_stall_refuses_saying_first_what_to_do_then_which_checkpoint() -> None:
    decision = checkpointloss.decide("Stall", LOST, WHOLE)

    assert not decision.start
    assert decision.problem == (
        "nothing was started and the Table is untouched: restore the checkpoint, or set "
        "checkpoint.onLoss to Recompute (read the inputs from their earliest offsets; needs their "
        "whole history) or StartFresh (start from startingOffsets and overwrite the Table). "
        "Lost: the checkpoint of table-counts (/ck/outputs/table-counts) holds no offsets while "
        "topic counts holds records."
    )


def test_recompute_starts_from_the_earliest_offsets_of_a_whole_history() -> None:
    decision = checkpointloss.decide("Recompute", LOST, WHOLE)

    assert decision == checkpointloss.Decision(start=True, from_earliest=True)


def test_recompute_refuses_when_retention_or_compaction_deleted_input_records() -> None:
    histories = (
        InputHistory(topic="words", compacted=False, first_offsets={0: 0, 1: 310, 2: 5}),
        InputHistory(topic="users", compacted=True, first_offsets={0: 0}),
        InputHistory(topic="kept", compacted=False, first_offsets={0: 0}),
    )

    decision = checkpointloss.decide("Recompute", LOST, histories)

    assert not decision.start
    assert decision.problem is not None
    assert (
        "(topic words: partition 1 starts at offset 310, partition 2 starts at offset 5; "
        "topic users is compacted)"
    ) in decision.problem
    assert "kept" not in decision.problem


def test_start_fresh_starts_from_the_starting_offsets() -> None:
    assert checkpointloss.decide("StartFresh", LOST, ()) == checkpointloss.START


def test_many_trimmed_partitions_are_summed_up() -> None:
    trimmed = InputHistory(topic="words", compacted=False, first_offsets={p: 10 for p in range(24)})

    assert checkpointloss.history_gaps([trimmed]) == [
        "topic words: partition 0 starts at offset 10, partition 1 starts at offset 10, "
        "partition 2 starts at offset 10 and 21 more partitions"
    ]
