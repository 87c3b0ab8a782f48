"""The pure half of the reconcile Topics and Tables share: the subject, its gate, its report.

A `Subject` is one Topic or Table as the handlers found it (its body, the topic it asks for, who
else claims that topic). `gate` reaches the verdicts that need no Kafka (paused, unmanaged, a
conflict, a bad name or spec, a cap exceeded, partitions not known yet); `derive_status_patch` and
`derive_notes` turn a verdict and what the sync did into the status patch and the Events;
`deletion_refusal` says when a deleted object's topic is kept. Imported by
`rillet.handlers.reconciling`, which does the I/O between them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rillet.reconcile import claims, naming, notes, quotas, statuses, topicownership
from rillet.reconcile.statuses import Verdict
from rillet.reconcile.topics import DesiredTopic, SyncOutcome

PAUSED = "rillet.io/paused"
MANAGED = "rillet.io/managed"


def is_paused(annotations: Mapping[str, str]) -> bool:
    return annotations.get(PAUSED, "").lower() == "true"


def is_managed(annotations: Mapping[str, str]) -> bool:
    return annotations.get(MANAGED, "").lower() != "false"


@dataclass(frozen=True)
class Subject:
    """One Topic or Table, what it asks of Kafka, and who else claims its topic."""

    kind: str
    body: Mapping[str, Any]
    kafka_name: str
    claim: claims.Claim
    rivals: tuple[claims.Claim, ...] = ()
    desired: DesiredTopic | None = None
    waiting: str | None = None  # why the desired topic is not known yet
    invalid: str | None = None  # what the models refuse in a stored spec (specproblems)
    over_quota: str | None = None  # which operator-wide cap it is over (quotas)
    warnings: tuple[tuple[str, str], ...] = ()  # (reason, message): worth an Event, no failure
    extra_status: Mapping[str, Any] = field(default_factory=dict)

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self.body["metadata"]  # type: ignore[no-any-return]

    @property
    def generation(self) -> int | None:
        generation = self.metadata.get("generation")
        return int(generation) if generation is not None else None

    @property
    def previous_status(self) -> dict[str, Any]:
        return dict(self.body.get("status") or {})


def gate(subject: Subject) -> Verdict | None:
    """A verdict reached without asking Kafka (paused, unmanaged, conflict, bad name), or None."""
    annotations = subject.metadata.get("annotations") or {}
    if is_paused(annotations):
        return Verdict(
            "paused",
            "ReconciliationPaused",
            f"reconciliation is paused by the annotation {PAUSED}=true: remove it to resume",
        )
    if not is_managed(annotations):
        return Verdict(
            "unmanaged",
            "Unmanaged",
            f"{MANAGED}=false: Rillet neither changes nor deletes Kafka topic "
            f"{subject.kafka_name}; remove the annotation to manage it again",
        )
    if subject.invalid is not None:
        return Verdict("stalled", "InvalidSpec", f"the spec is invalid: {subject.invalid}")
    winner = claims.owner([subject.claim, *subject.rivals])
    if winner is not None and winner.uid != subject.claim.uid:
        return Verdict(
            "stalled", "TopicConflict", claims.conflict_message(subject.kafka_name, winner)
        )
    problem = naming.name_problem(subject.kafka_name)
    if problem:
        return Verdict("stalled", "InvalidTopicName", problem)
    if subject.over_quota is not None:
        return Verdict("stalled", quotas.QUOTA_EXCEEDED, subject.over_quota)
    if subject.waiting is not None:
        return Verdict("progressing", "WaitingForPartitions", subject.waiting)
    return None


def claim_record(subject: Subject, *, release: str) -> topicownership.ClaimRecord:
    """The subject's claim on its topic as `release` records it in Kafka."""
    claim = subject.claim
    return topicownership.ClaimRecord(
        release=release, kind=claim.kind, namespace=claim.namespace, name=claim.name, uid=claim.uid
    )


def wish_of(subject: Subject, *, release: str) -> topicownership.Wish:
    """What the subject asks about owning its topic: its opt-in, its policy, and the topic its
    status records having managed (by id: a topic made again by someone else is another)."""
    status = subject.previous_status
    policy = (subject.body.get("spec") or {}).get("configPolicy")
    return topicownership.Wish(
        claim=claim_record(subject, release=release),
        adopt=topicownership.wants_adoption(subject.metadata.get("annotations") or {}),
        known_topic_id=status.get("topicId")
        if status.get("topicName") == subject.kafka_name
        else None,
        config_policy=policy if policy in ("Merge", "Replace") else None,
    )


def deletion_refusal(subject: Subject) -> str | None:
    """Why the subject's Kafka topic must be kept when the object goes, or None."""
    if subject.invalid is not None:
        return f"the spec is invalid ({subject.invalid})"
    return naming.name_problem(subject.kafka_name)


def derive_status_patch(
    subject: Subject, verdict: Verdict, outcome: SyncOutcome, *, now: datetime
) -> dict[str, Any]:
    """The merge patch from the current status to the derived one (empty: nothing to write)."""
    previous = subject.previous_status
    status = statuses.topic_status(
        verdict,
        kafka_name=subject.kafka_name,
        observed=outcome.observed,
        generation=subject.generation,
        previous=previous,
        now=now,
    )
    if outcome.observed is None and verdict.state in ("paused", "unmanaged", "progressing"):
        # Not looked at Kafka this time: keep what was last seen there.
        for key in ("topicId", "partitions", "replicationFactor", "config"):
            if key in previous:
                status[key] = previous[key]
    status |= {key: value for key, value in subject.extra_status.items() if value is not None}
    return statuses.merge_patch(previous, status)


def derive_notes(
    subject: Subject, verdict: Verdict, outcome: SyncOutcome
) -> tuple[notes.Note, ...]:
    """Events for what changed in Kafka, and for a verdict that differs from the last one."""
    previous = subject.previous_status
    conditions = previous.get("conditions") or []
    ready = statuses.standing_condition(conditions)
    # Changes made while the spec stood still and the topic was Ready undo drift made in Kafka.
    drifted = ready.get("status") == "True" and previous.get("observedGeneration") == (
        subject.generation
    )
    posted = [
        notes.Note(
            "Warning",
            "DriftCorrected",
            f"Kafka topic {subject.kafka_name} had drifted from the spec: {change}",
        )
        if drifted
        else notes.Note("Normal", _change_reason(change), change)
        for change in outcome.applied
    ]
    if ready.get("reason") != verdict.reason or ready.get("message") != verdict.message:
        if verdict.state == "stalled" or verdict.reason == "KafkaUnavailable":
            posted.append(notes.Note("Warning", verdict.reason, verdict.message))
        elif ready.get("reason") != verdict.reason and not posted:
            # A change just reported says enough; one Event per reconcile keeps writes down.
            posted.append(notes.Note("Normal", verdict.reason, verdict.message))
    return tuple(posted)


def _change_reason(change: str) -> str:
    verb = change.split(" ", 1)[0]
    return {"created": "TopicCreated", "grew": "PartitionsAdded"}.get(verb, "ConfigChanged")
