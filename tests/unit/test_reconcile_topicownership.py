"""Whether an object may take, change or delete a Kafka topic, by the claims recorded in Kafka.

Test plan:
- a topic that does not exist is claimed (as created) before it is made; config policy Replace.
- an existing topic nobody claims: refused (TopicExists, saying what to do) without the opt-in;
  adopted with it, keeping undeclared overrides (Merge) unless spec.configPolicy says Replace;
  taken without it when the object's status records that very topic id (managed before the
  upgrade), with today's Replace.
- a topic another release claims is refused, with or without the opt-in, whether or not it
  exists, and the refusal names the release and its object.
- the object's own claim needs no new record; a successor object (same kind, namespace, name,
  new uid) inherits the claim and whether it was adopted.
- another object of the same release: refused without the opt-in, taken with it.
- configPolicy overrides the default both ways.
- deletion: only a topic whose recorded claim is the object's (or its predecessor's).
- a record survives encoding; a tombstone or a foreign value decodes to no claim.
- Merge keeps undeclared overrides in the diff; Replace deletes them.
"""

from __future__ import annotations

import dataclasses

import pytest

from rillet.reconcile import topicownership
from rillet.reconcile.topicconfigs import diff
from rillet.reconcile.topicownership import ClaimRecord, Wish

pytestmark = pytest.mark.unit

MINE = ClaimRecord(release="ns/rillet", kind="Topic", namespace="team-a", name="orders", uid="u1")
THEIRS = ClaimRecord(release="ns/other", kind="Topic", namespace="team-b", name="x", uid="u9")
TOPIC = "orders"


def _decide(
    wish: Wish, *, found: ClaimRecord | None, topic_id: str | None
) -> topicownership.Decision:
    return topicownership.decide(wish, found=found, topic_id=topic_id, kafka_name=TOPIC)


def test_a_new_topic_is_claimed_as_created_and_replaced() -> None:
    decision = _decide(Wish(claim=MINE), found=None, topic_id=None)
    assert decision == topicownership.Decision(record=MINE, merge=False)


def test_an_unclaimed_existing_topic_is_refused_without_the_opt_in() -> None:
    decision = _decide(Wish(claim=MINE), found=None, topic_id="id1")
    assert decision.refusal is not None
    reason, message = decision.refusal
    assert reason == "TopicExists"
    assert "rillet.io/adopt=true" in message
    assert TOPIC in message
    assert decision.record is None


def test_the_opt_in_adopts_keeping_undeclared_configs() -> None:
    decision = _decide(Wish(claim=MINE, adopt=True), found=None, topic_id="id1")
    assert decision.refusal is None
    assert decision.record == dataclasses.replace(MINE, adopted=True)
    assert decision.merge


def test_config_policy_replace_overrides_the_adopted_default() -> None:
    wish = Wish(claim=MINE, adopt=True, config_policy="Replace")
    assert not _decide(wish, found=None, topic_id="id1").merge


def test_config_policy_merge_overrides_the_created_default() -> None:
    assert _decide(Wish(claim=MINE, config_policy="Merge"), found=None, topic_id=None).merge


def test_a_topic_the_status_records_is_kept_after_the_upgrade_with_replace() -> None:
    decision = _decide(Wish(claim=MINE, known_topic_id="id1"), found=None, topic_id="id1")
    assert decision == topicownership.Decision(record=MINE, merge=False)


def test_a_topic_made_again_by_someone_else_is_not_the_one_the_status_records() -> None:
    decision = _decide(Wish(claim=MINE, known_topic_id="id1"), found=None, topic_id="id2")
    assert decision.refusal is not None
    assert decision.refusal[0] == "TopicExists"


@pytest.mark.parametrize("adopt", [False, True])
@pytest.mark.parametrize("topic_id", [None, "id1"])
def test_another_releases_claim_is_refused(adopt: bool, topic_id: str | None) -> None:
    decision = _decide(Wish(claim=MINE, adopt=adopt), found=THEIRS, topic_id=topic_id)
    assert decision.refusal is not None
    reason, message = decision.refusal
    assert reason == "TopicClaimed"
    assert "ns/other" in message
    assert "team-b/x" in message
    assert decision.record is None


def test_the_objects_own_claim_needs_no_new_record() -> None:
    adopted = dataclasses.replace(MINE, adopted=True)
    decision = _decide(Wish(claim=MINE), found=adopted, topic_id="id1")
    assert decision == topicownership.Decision(record=None, merge=True)


def test_a_successor_object_inherits_the_claim() -> None:
    predecessor = dataclasses.replace(MINE, uid="u0")
    decision = _decide(Wish(claim=MINE), found=predecessor, topic_id="id1")
    assert decision == topicownership.Decision(record=MINE, merge=False)


def test_another_object_of_the_release_needs_the_opt_in() -> None:
    other = dataclasses.replace(MINE, namespace="team-c", uid="u5")
    refused = _decide(Wish(claim=MINE), found=other, topic_id="id1")
    assert refused.refusal is not None
    assert refused.refusal[0] == "TopicClaimed"
    assert "team-c/orders" in refused.refusal[1]
    assert topicownership.ADOPT in refused.refusal[1]
    taken = _decide(Wish(claim=MINE, adopt=True), found=other, topic_id="id1")
    assert taken.refusal is None
    assert taken.record == dataclasses.replace(MINE, adopted=True)


@pytest.mark.parametrize(
    ("found", "kept"),
    [
        (None, True),
        (THEIRS, True),
        (dataclasses.replace(MINE, namespace="team-c"), True),
        (MINE, False),
        (dataclasses.replace(MINE, uid="u0", adopted=True), False),
    ],
)
def test_deletion_only_of_the_objects_own_topic(found: ClaimRecord | None, kept: bool) -> None:
    refusal = topicownership.deletion_refusal(MINE, found=found, kafka_name=TOPIC)
    assert (refusal is not None) == kept


def test_a_record_survives_encoding_and_junk_is_no_claim() -> None:
    record = dataclasses.replace(MINE, adopted=True)
    assert topicownership.decode(record.encode()) == record
    assert topicownership.decode(None) is None
    assert topicownership.decode(b"") is None
    assert topicownership.decode(b"not json") is None
    assert topicownership.decode(b'{"release": "x"}') is None


def test_the_opt_in_is_the_annotation_true() -> None:
    assert topicownership.wants_adoption({topicownership.ADOPT: "true"})
    assert topicownership.wants_adoption({topicownership.ADOPT: "True"})
    assert not topicownership.wants_adoption({topicownership.ADOPT: "yes"})
    assert not topicownership.wants_adoption({})


def test_merge_keeps_undeclared_overrides_and_replace_deletes_them() -> None:
    desired = {"retention.ms": "1000"}
    overrides = {"retention.ms": "-1", "segment.bytes": "1048576"}
    merged = diff(desired, overrides, merge=True)
    assert merged.set == {"retention.ms": "1000"}
    assert merged.delete == ()
    replaced = diff(desired, overrides)
    assert replaced.delete == ("segment.bytes",)
