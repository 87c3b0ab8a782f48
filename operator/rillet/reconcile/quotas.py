"""Operator-wide caps on what one namespace's Topics and Tables may ask of a shared Kafka.

A platform team sets them in the chart's values (`operator.maxPartitionsPerTopic`,
`operator.maxTopicsPerNamespace`): without them one tenant could ask for 100,000 partitions of a
topic, or thousands of topics, and take the brokers down for everyone. An object over a cap is
Stalled (QuotaExceeded) and asks nothing of Kafka; the oldest objects of a namespace keep their
topics when the cap on their number is lowered, the newest wait.
"""

from __future__ import annotations

from dataclasses import dataclass

from rillet.reconcile import claims

QUOTA_EXCEEDED = "QuotaExceeded"


@dataclass(frozen=True)
class TopicQuotas:
    """The caps, as the operator's settings give them."""

    partitions_per_topic: int
    topics_per_namespace: int


def older_in_namespace(subject: claims.Claim, found: list[claims.Claim]) -> int:
    """How many other live objects of the subject's namespace were made before it (creation
    time, then uid: a stable order for objects of the same second)."""
    others = claims.rivals_of(subject, found)
    return sum(1 for other in others if (other.created, other.uid) < (subject.created, subject.uid))


def problem(
    quotas: TopicQuotas, *, namespace: str, partitions: int | None, older: int
) -> str | None:
    """Why the object is over a cap, or None."""
    if partitions is not None and partitions > quotas.partitions_per_topic:
        return (
            f"{partitions} partitions is more than the {quotas.partitions_per_topic} per topic "
            f"this operator allows (operator.maxPartitionsPerTopic): ask for fewer"
        )
    if older >= quotas.topics_per_namespace:
        return (
            f"namespace {namespace} already has {older} Topics and Tables, the most this "
            f"operator allows (operator.maxTopicsPerNamespace): delete one, or ask the "
            f"platform team for more"
        )
    return None
