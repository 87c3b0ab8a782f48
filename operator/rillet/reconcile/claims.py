"""Who owns a Kafka topic when several objects claim it: the oldest one.

Objects in any namespace may name the same Kafka topic. The oldest keeps it; the others are told
who owns it and are never allowed to change or delete it. Creation times have one-second
resolution, so among objects of the same second the one already managing the topic (the
incumbent) wins, then the uid breaks the tie for a stable answer.

An index may still hold an object that is gone (kopf misses a deletion while its watch is down,
say across a namespace deleted and made again): two claims of one kind, namespace and name
can only be an object and its deleted predecessor, so only the newest of them counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, order=True)
class Claim:
    """One object's claim on a Kafka topic name."""

    created: datetime
    challenger: bool  # False when the object already manages the topic (sorts first)
    uid: str
    kind: str
    namespace: str
    name: str

    @property
    def reference(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def identity(self) -> tuple[str, str, str]:
        """Kind, namespace and name: what Kubernetes keeps unique at any moment."""
        return self.kind, self.namespace, self.name


def rivals_of(subject: Claim, found: Iterable[Claim]) -> tuple[Claim, ...]:
    """The claims of other live objects: not the subject, nor a gone object of its identity,
    and of each other identity only the newest."""
    newest: dict[tuple[str, str, str], Claim] = {}
    for claim in found:
        if claim.identity == subject.identity:
            continue
        kept = newest.get(claim.identity)
        if kept is None or claim.created > kept.created:
            newest[claim.identity] = claim
    return tuple(newest.values())


def owner(claims: Iterable[Claim]) -> Claim | None:
    """The claim that wins."""
    return min(claims, default=None)


def conflict_message(kafka_name: str, winner: Claim) -> str:
    """What the losing object's status says."""
    return (
        f"Kafka topic {kafka_name} is already managed by {winner.reference}, created earlier: "
        f"set spec.topicName to another name, or delete this object (the topic is kept)"
    )
