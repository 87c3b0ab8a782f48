"""Committing a batch's offsets while the group's coordinator settles, without Kafka.

Test plan:
- a commit Kafka answers with NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS (a new group's
  first commit) is sent again, and the batch's offsets end up committed;
- any other failure (here: authorization) fails the batch's commit at once, commits nothing, and
  the next batch commits again;
- a closed committer (its driver stopped) lets go of its Kafka client and commits nothing more.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import pytest
from confluent_kafka import KafkaError, KafkaException

from rillet.runtime.batches import committing, progress


class ScriptedCommitter(committing.OffsetCommitter):
    """A committer whose one Kafka request (`_commit`) fails with the scripted errors first."""

    def __init__(self, *errors: int) -> None:  # no AdminClient: nothing here talks to Kafka
        self.group = "rillet.team.wc"
        self._readers = progress.initial_readers(topics=["lines"], queries=["q"])
        self._reported = {}
        self._committed = {}
        self._lock = threading.Lock()
        self._admin = object()  # type: ignore[assignment]  # never used: _commit is scripted
        self.errors = list(errors)
        self.sent: list[dict[progress.TopicPartition, int]] = []

    def _commit(self, plan: Mapping[progress.TopicPartition, int]) -> None:
        self.sent.append(dict(plan))
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))


def _batch(batch_id: int, end: int) -> progress.BatchProgress:
    return progress.BatchProgress(
        query="q",
        batch_id=batch_id,
        partitions=(
            progress.PartitionProgress(
                topic="lines", partition=0, end_offset=end, latest_offset=end
            ),
        ),
        input_rows=end,
        input_rows_per_second=0.0,
        processed_rows_per_second=0.0,
        duration_seconds=1.0,
        late_rows_dropped=0,
        observed={},
    )


def test_a_commit_is_sent_again_while_the_coordinator_settles() -> None:
    committer = ScriptedCommitter(
        KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS
    )

    committed = committer.on_batch(_batch(0, 120))

    assert committed == {("lines", 0): 120}
    assert committer.committed == {("lines", 0): 120}
    assert len(committer.sent) == 3


def test_another_failure_fails_the_commit_and_the_next_batch_commits_again() -> None:
    committer = ScriptedCommitter(KafkaError.GROUP_AUTHORIZATION_FAILED)

    with pytest.raises(KafkaException):
        committer.on_batch(_batch(0, 120))
    assert committer.committed == {}
    assert len(committer.sent) == 1

    assert committer.on_batch(_batch(1, 200)) == {("lines", 0): 200}
    assert committer.committed == {("lines", 0): 200}


def test_a_closed_committer_lets_go_of_its_client_and_commits_nothing_more() -> None:
    committer = ScriptedCommitter()
    assert committer.on_batch(_batch(0, 120)) == {("lines", 0): 120}

    committer.close()

    assert committer._admin is None  # the client's last reference: it is destroyed with it
    assert committer.on_batch(_batch(1, 200)) == {}
    assert committer.committed == {("lines", 0): 120}
    assert len(committer.sent) == 1
