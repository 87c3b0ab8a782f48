"""Whether an App may start when a Table output's checkpoint is gone (pure).

Test plan:
- nothing lost: start, whatever the policy;
- Stall (the default) refuses, naming the lost checkpoint, the Table's records and all three
  ways out;
- Recompute starts from the earliest offsets only when every input holds its whole history; a
  compacted input or a partition that no longer starts at offset 0 refuses, naming each gap;
- StartFresh starts from startingOffsets.
"""

from __future__ import annotations

from rillet.reconcile import checkpointloss
from rillet.reconcile.checkpointloss import InputHistory, LostTable

LOST = (LostTable(output_id="table-counts", topic="counts", records=1200),)
WHOLE = (InputHistory(topic="words", compacted=False, first_offsets={0: 0, 1: 0}),)


def test_nothing_lost_starts_whatever_the_policy() -> None:
    for policy in ("Stall", "Recompute", "StartFresh"):
        assert checkpointloss.decide(policy, (), ()) == checkpointloss.START


def test_stall_refuses_and_names_the_table_and_every_way_out() -> None:
    decision = checkpointloss.decide("Stall", LOST, WHOLE)

    assert not decision.start
    assert decision.problem is not None
    assert decision.problem.startswith(
        "the checkpoint holds no offsets for table-counts (1200 records in topic counts); "
        "nothing was started and the Table is untouched."
    )
    for way_out in ("Restore the checkpoint", "Recompute", "StartFresh"):
        assert way_out in decision.problem


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
