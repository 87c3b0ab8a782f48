"""The pure decisions of the Topic and Table reconcile, without Kafka or a cluster.

Test plan:
- the gate stops before Kafka, in this order: paused, unmanaged (both say how to undo it), a
  stored spec the models refuse (InvalidSpec), a topic an older object claims (TopicConflict,
  naming the winner), a name Kafka refuses or an internal topic's, and partitions not yet
  known; an object that passes them all gets no verdict;
- a deleted object's topic is kept when its spec is invalid or its name is an internal topic's;
- a change made while the object stood Ready at its generation is drift undone: a Warning
  DriftCorrected; the same change after a spec change is a Normal TopicCreated/PartitionsAdded/
  ConfigChanged, and a new verdict adds no second Event when a change was reported;
- a verdict reached without looking at Kafka keeps what was last seen there in the status.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from rillet.reconcile import claims, subjects
from rillet.reconcile.statuses import Verdict
from rillet.reconcile.topics import DesiredTopic, ObservedTopic, SyncOutcome

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def _claim(uid: str, *, created: datetime = NOW, name: str = "orders") -> claims.Claim:
    return claims.Claim(created, False, uid, "Topic", "shop", name)


def _subject(
    *,
    annotations: dict[str, str] | None = None,
    kafka_name: str = "shop.orders",
    rivals: tuple[claims.Claim, ...] = (),
    waiting: str | None = None,
    invalid: str | None = None,
    status: dict[str, Any] | None = None,
    generation: int = 2,
) -> subjects.Subject:
    body = {
        "metadata": {"name": "orders", "generation": generation, "annotations": annotations or {}},
        "status": status or {},
    }
    return subjects.Subject(
        kind="Topic",
        body=body,
        kafka_name=kafka_name,
        claim=_claim("mine", created=NOW),
        rivals=rivals,
        desired=None if waiting else DesiredTopic(kafka_name, 3, 1, {}, ("mine", generation)),
        waiting=waiting,
        invalid=invalid,
    )


def test_the_gate_stops_paused_then_unmanaged_then_conflicting_then_badly_named() -> None:
    paused = subjects.gate(_subject(annotations={subjects.PAUSED: "true"}))
    assert paused is not None
    assert (paused.state, paused.reason) == ("paused", "ReconciliationPaused")
    assert "remove it to resume" in paused.message

    unmanaged = subjects.gate(_subject(annotations={subjects.MANAGED: "false"}))
    assert unmanaged is not None
    assert (unmanaged.state, unmanaged.reason) == ("unmanaged", "Unmanaged")
    assert "shop.orders" in unmanaged.message

    older = claims.Claim(datetime(2026, 1, 1, tzinfo=UTC), False, "theirs", "Table", "shop", "t")
    conflict = subjects.gate(_subject(rivals=(older,)))
    assert conflict is not None
    assert (conflict.state, conflict.reason) == ("stalled", "TopicConflict")
    assert "Table shop/t" in conflict.message

    invalid = subjects.gate(_subject(invalid="topicName: must not start with '_'"))
    assert invalid is not None
    assert (invalid.state, invalid.reason) == ("stalled", "InvalidSpec")
    assert "topicName: must not start with '_'" in invalid.message

    bad = subjects.gate(_subject(kafka_name="shop." + "o" * 300))  # too long once prefixed
    assert bad is not None
    assert (bad.state, bad.reason) == ("stalled", "InvalidTopicName")

    internal = subjects.gate(_subject(kafka_name="__consumer_offsets"))
    assert internal is not None
    assert (internal.state, internal.reason) == ("stalled", "InvalidTopicName")
    assert "internal topic" in internal.message

    waiting = subjects.gate(_subject(waiting="the Table's input has no partitions yet"))
    assert waiting == Verdict(
        "progressing", "WaitingForPartitions", "the Table's input has no partitions yet"
    )

    assert subjects.gate(_subject()) is None
    younger = _claim("later", created=datetime(2027, 1, 1, tzinfo=UTC))
    assert subjects.gate(_subject(rivals=(younger,))) is None


def test_a_deleted_objects_topic_is_kept_when_its_spec_or_name_is_refused() -> None:
    assert subjects.deletion_refusal(_subject()) is None
    invalid = subjects.deletion_refusal(_subject(invalid="partitions: must be at least 1"))
    assert invalid is not None
    assert "partitions: must be at least 1" in invalid
    internal = subjects.deletion_refusal(_subject(kafka_name="_schemas"))
    assert internal is not None
    assert "internal topic" in internal


READY = Verdict("ready", "TopicReady", "topic shop.orders is ready")


def _ready_status(generation: int) -> dict[str, Any]:
    condition = {"type": "Ready", "status": "True", "reason": "TopicReady"}
    return {"observedGeneration": generation, "conditions": [condition]}


def test_a_change_to_a_ready_topic_at_its_generation_is_drift_corrected() -> None:
    outcome = SyncOutcome(applied=("set retention.ms to 60000",))
    drifted = subjects.derive_notes(_subject(status=_ready_status(2)), READY, outcome)
    assert [(n.type, n.reason) for n in drifted] == [("Warning", "DriftCorrected")]
    assert "had drifted from the spec: set retention.ms to 60000" in drifted[0].message

    changed = subjects.derive_notes(_subject(status=_ready_status(1)), READY, outcome)
    assert [(n.type, n.reason) for n in changed] == [("Normal", "ConfigChanged")]

    created = subjects.derive_notes(_subject(), READY, SyncOutcome(applied=("created x",)))
    assert [(n.type, n.reason) for n in created] == [("Normal", "TopicCreated")]


def test_a_new_verdict_is_an_event_unless_a_change_already_said_it() -> None:
    assert [n.reason for n in subjects.derive_notes(_subject(), READY, SyncOutcome())] == [
        "TopicReady"
    ]
    stalled = Verdict("stalled", "PartitionsDecrease", "cannot shrink")
    assert [
        (n.type, n.reason) for n in subjects.derive_notes(_subject(), stalled, SyncOutcome())
    ] == [("Warning", "PartitionsDecrease")]
    again = subjects.derive_notes(_subject(status=_ready_status(2)), READY, SyncOutcome())
    assert again == ()


def test_a_verdict_without_kafka_keeps_what_kafka_last_showed() -> None:
    seen = {"topicId": "abc", "partitions": 3, "replicationFactor": 1, "config": {}}
    subject = _subject(annotations={subjects.PAUSED: "true"}, status=seen)
    verdict = subjects.gate(subject)
    assert verdict is not None
    patch = subjects.derive_status_patch(subject, verdict, SyncOutcome(), now=NOW)
    assert not {"topicId", "partitions", "replicationFactor"} & set(patch)  # unchanged: no write

    observed = ObservedTopic("shop.orders", "def", 6, 1)
    patch = subjects.derive_status_patch(
        _subject(status=seen), READY, SyncOutcome(observed=observed), now=NOW
    )
    assert (patch["topicId"], patch["partitions"]) == ("def", 6)


def test_the_wish_carries_the_opt_in_the_policy_and_the_topic_the_status_records() -> None:
    recorded = {"topicName": "shop.orders", "topicId": "id1"}
    wish = subjects.wish_of(
        _subject(annotations={"rillet.io/adopt": "true"}, status=recorded), release="ns/r"
    )
    assert wish.adopt
    assert wish.known_topic_id == "id1"
    assert wish.config_policy is None
    assert (wish.claim.release, wish.claim.kind, wish.claim.uid) == ("ns/r", "Topic", "mine")
    other_topic = {"topicName": "elsewhere", "topicId": "id1"}
    wish = subjects.wish_of(_subject(status=other_topic), release="ns/r")
    assert not wish.adopt
    assert wish.known_topic_id is None
