"""Lag of a consumer group on a topic, from offsets (the arithmetic of kafka.lag, no Kafka).

Test plan:
- lag is the sum over partitions of latest minus committed offset;
- a partition without a commit (added since the last batch) counts from its earliest offset;
- unknown when nothing of the topic is committed yet, when the partition count is unknown, or
  when an offset needed is missing; never negative (a commit seen before the latest offset);
- an App reading from the earliest offsets is behind by the whole topic before its first commit;
- earliest offsets are asked for exactly the partitions whose lag counts from them.
"""

from __future__ import annotations

from rillet.kafka.lag import topic_lag, uncommitted_partitions


def test_lag_sums_latest_minus_committed() -> None:
    lag = topic_lag(3, latest={0: 100, 1: 50, 2: 7}, committed={0: 90, 1: 50, 2: 0}, earliest={})
    assert lag == 10 + 0 + 7


def test_a_new_partition_counts_from_its_earliest_offset() -> None:
    lag = topic_lag(
        4, latest={0: 10, 1: 10, 2: 30, 3: 5}, committed={0: 10, 1: 10}, earliest={2: 20, 3: 0}
    )
    assert lag == 10 + 5


def test_lag_is_unknown_without_commits_or_offsets() -> None:
    assert topic_lag(2, latest={0: 5, 1: 5}, committed={}, earliest={0: 0, 1: 0}) is None
    assert topic_lag(None, latest={}, committed={0: 1}, earliest={}) is None
    assert topic_lag(2, latest={0: 5}, committed={0: 1, 1: 1}, earliest={}) is None
    assert topic_lag(2, latest={0: 5, 1: 5}, committed={0: 1}, earliest={}) is None


def test_lag_is_never_negative() -> None:
    assert topic_lag(1, latest={0: 5}, committed={0: 8}, earliest={}) == 0


def test_before_its_first_commit_an_app_reading_from_the_start_is_behind_by_all() -> None:
    offsets = {"latest": {0: 10, 1: 7}, "earliest": {0: 2, 1: 0}}
    assert topic_lag(2, committed={}, from_start=True, **offsets) == 8 + 7
    assert topic_lag(2, committed={}, from_start=False, **offsets) is None


def test_earliest_offsets_are_asked_for_the_partitions_that_need_them() -> None:
    wanted = {"new": ["a"], "grown": ["a", "b"], "latest": ["b"], "unreadable": ["a"]}
    committed = {
        "new": {},
        "grown": {("a", 0): 5, ("a", 1): 5, ("b", 0): 1},
        "latest": {},
        "unreadable": None,
    }
    found = uncommitted_partitions(
        wanted,
        {"a": 3, "b": 2},
        committed,
        from_start={("new", "a"), ("unreadable", "a")},
    )
    assert found == [("a", 0), ("a", 1), ("a", 2), ("b", 1)]
