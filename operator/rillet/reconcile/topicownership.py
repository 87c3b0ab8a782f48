"""Whether an object may take, change or delete a Kafka topic: the claims Rillet records in Kafka.

Purely computational. Kopf's indexes settle claims between objects one operator release sees
(`claims`, the oldest wins); this module settles them against what Kafka itself records, so that
releases sharing one Kafka, and topics nobody made with Rillet, are never taken over:

- a topic claimed by another release is never changed nor deleted (`TopicClaimed`);
- a topic that exists with no claim is adopted only with the annotation `rillet.io/adopt=true`
  (`TopicExists` otherwise), or when the object's status already records that very topic (its
  id): it managed it before claims were recorded (upgrade);
- a topic is claimed before Rillet creates or adopts it, and the claim says which of the two, so
  that the default config policy follows: Replace for a created topic (drift correction deletes
  undeclared overrides), Merge for an adopted one (they are kept). The claim of a re-created
  object of the same kind, namespace and name (a successor) passes to it.

The records live in a compacted topic (`kafka.claimstore`, decision 022).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Literal

ADOPT = "rillet.io/adopt"

ConfigPolicy = Literal["Merge", "Replace"]


def wants_adoption(annotations: Mapping[str, str]) -> bool:
    """Whether the object opts in to adopting a topic Rillet did not create."""
    return annotations.get(ADOPT, "").lower() == "true"


@dataclass(frozen=True)
class ClaimRecord:
    """One claim as recorded in Kafka: which release, and which of its objects, owns a topic."""

    release: str
    kind: str
    namespace: str
    name: str
    uid: str
    adopted: bool = False  # the topic existed before the claim (adopted, not created)

    @property
    def identity(self) -> tuple[str, str, str, str]:
        return self.release, self.kind, self.namespace, self.name

    @property
    def reference(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name} of Rillet release {self.release}"

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()


def decode(value: bytes | None) -> ClaimRecord | None:
    """A recorded claim; None for a tombstone or a value no release of Rillet wrote."""
    if not value:
        return None
    try:
        fields = json.loads(value)
        return ClaimRecord(
            release=str(fields["release"]),
            kind=str(fields["kind"]),
            namespace=str(fields["namespace"]),
            name=str(fields["name"]),
            uid=str(fields["uid"]),
            adopted=bool(fields.get("adopted", False)),
        )
    except (ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class Wish:
    """What an object asks about its topic: its claim, its opt-in, the topic id its status
    records (the topic it managed before), and its spec.configPolicy."""

    claim: ClaimRecord
    adopt: bool = False
    known_topic_id: str | None = None
    config_policy: ConfigPolicy | None = None


@dataclass(frozen=True)
class Decision:
    """May the object go on (`refusal` None: reason and message otherwise), the claim to
    record before any change (None: already recorded), and whether undeclared configs stay."""

    refusal: tuple[str, str] | None = None
    record: ClaimRecord | None = None
    merge: bool = False


def decide(
    wish: Wish, *, found: ClaimRecord | None, topic_id: str | None, kafka_name: str
) -> Decision:
    """Whether `wish` may create or change topic `kafka_name` (`topic_id` None: it does not
    exist), given the claim `found` recorded for it."""
    mine = wish.claim
    if found is not None and found.release != mine.release:
        return Decision(refusal=("TopicClaimed", _claimed(kafka_name, found)))
    if found is not None and found.identity == mine.identity:
        kept = replace(mine, adopted=found.adopted)
        return Decision(record=None if kept == found else kept, merge=_merge(wish, kept))
    if topic_id is None:
        # Nothing to take over: created, and claimed first.
        return Decision(record=mine, merge=_merge(wish, mine))
    if found is None and wish.known_topic_id == topic_id:
        return Decision(record=mine, merge=_merge(wish, mine))  # managed before the upgrade
    if wish.adopt:
        adopted = replace(mine, adopted=True)
        return Decision(record=adopted, merge=_merge(wish, adopted))
    if found is not None:
        return Decision(
            refusal=(
                "TopicClaimed",
                f"{_claimed(kafka_name, found)}. If that object is gone, add the annotation "
                f"{ADOPT}=true to adopt the topic",
            )
        )
    return Decision(
        refusal=(
            "TopicExists",
            f"Kafka topic {kafka_name} exists and Rillet did not create it: it is neither "
            f"changed nor deleted. To manage it, add the annotation {ADOPT}=true (configs it "
            f"holds that spec.config does not declare are kept unless spec.configPolicy is "
            f"Replace), or set spec.topicName to another name",
        )
    )


def _claimed(kafka_name: str, found: ClaimRecord) -> str:
    return f"Kafka topic {kafka_name} is claimed by {found.reference}"


def _merge(wish: Wish, record: ClaimRecord) -> bool:
    """Whether undeclared overrides are kept: the object's policy, else Merge only when adopted."""
    if wish.config_policy is not None:
        return wish.config_policy == "Merge"
    return record.adopted


def deletion_refusal(
    claim: ClaimRecord, *, found: ClaimRecord | None, kafka_name: str
) -> str | None:
    """Why an object's deletion must keep its topic (None: the topic is its own to delete)."""
    if found is None:
        return f"Rillet holds no claim of this object on Kafka topic {kafka_name}"
    if found.identity != claim.identity:
        return _claimed(kafka_name, found)
    return None
