"""Planning a Kafka topic: from what is declared and what Kafka holds to the changes to make.

Purely computational: no I/O. The syncing layer describes topics in one batch, asks `plan` per
topic, and carries out the plans in one batched call per kind of change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rillet.reconcile import topicconfigs, topicownership
from rillet.reconcile.topicconfigs import ConfigDiff


@dataclass(frozen=True)
class DesiredTopic:
    """A topic as declared: configs already in canonical form.

    `source` is the (uid, generation) of the object that declared it, so an older declaration
    (a resync that read the object before its latest change) never overrides a newer one.
    `wish` is what the object asks about owning the topic (`topicownership`); the handlers always
    set it, a declaration without one (unit tests of the batching) skips the ownership check.
    """

    name: str
    partitions: int
    replication_factor: int | None
    config: dict[str, str] = field(default_factory=dict)
    source: tuple[str, int] | None = None
    wish: topicownership.Wish | None = None

    def superseded_by(self, newer: tuple[str, int] | None) -> bool:
        """Whether a later declaration of the same object replaces this one."""
        return (
            self.source is not None
            and newer is not None
            and self.source[0] == newer[0]
            and self.source[1] < newer[1]
        )


@dataclass(frozen=True)
class ObservedTopic:
    """A topic as Kafka describes it; `overrides` are its dynamic topic configs only."""

    name: str
    topic_id: str
    partitions: int
    replication_factor: int
    overrides: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Problem:
    """Something the operator cannot do without a change from the user."""

    reason: str
    message: str


@dataclass(frozen=True)
class TopicPlan:
    """The changes that bring a topic in line, and what stands in the way of the rest."""

    create: bool = False
    grow_to: int | None = None
    config: ConfigDiff = field(default_factory=ConfigDiff)
    problems: tuple[Problem, ...] = ()

    @property
    def changes(self) -> bool:
        return self.create or self.grow_to is not None or bool(self.config)


@dataclass(frozen=True)
class SyncOutcome:
    """What one reconcile of a topic found in Kafka and did there."""

    observed: ObservedTopic | None = None
    applied: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    unavailable: str | None = None  # Kafka could not be reached: the message says why
    superseded: bool = False  # a newer declaration was handled instead: report nothing
    # Kafka accepted a change that describe still does not show (broker metadata lagging the
    # controller past syncing.CATCH_UP_SECONDS): not Ready until a later pass sees it.
    lagging: bool = False


def plan(
    desired: DesiredTopic, observed: ObservedTopic | None, *, merge: bool = False
) -> TopicPlan:
    """What to do about one topic. A problem never stops the other changes from being planned.
    `merge`: keep the overrides the declaration does not name (`topicconfigs.diff`)."""
    if observed is None:
        return TopicPlan(create=True)
    problems: list[Problem] = []
    grow_to = None
    if desired.partitions > observed.partitions:
        grow_to = desired.partitions
    elif desired.partitions < observed.partitions:
        problems.append(
            Problem(
                "PartitionDecreaseNotSupported",
                f"Kafka topic {desired.name} has {observed.partitions} partitions but "
                f"spec.partitions is {desired.partitions}: Kafka cannot remove partitions. Set "
                f"spec.partitions to {observed.partitions} or more, or use a new topic.",
            )
        )
    if (
        desired.replication_factor is not None
        and desired.replication_factor != observed.replication_factor
    ):
        problems.append(
            Problem(
                "ReplicationFactorChangeNotSupported",
                f"Kafka topic {desired.name} has replication factor "
                f"{observed.replication_factor} but spec.replicationFactor is "
                f"{desired.replication_factor}: that takes a partition reassignment, which "
                f"Rillet does not do. Set spec.replicationFactor to "
                f"{observed.replication_factor}, or reassign the partitions with Kafka's "
                f"kafka-reassign-partitions tool.",
            )
        )
    return TopicPlan(
        grow_to=grow_to,
        config=topicconfigs.diff(desired.config, observed.overrides, merge=merge),
        problems=tuple(problems),
    )


def describe_changes(plan_: TopicPlan, desired: DesiredTopic) -> list[str]:
    """One line per change, for Events and logs."""
    lines = []
    if plan_.create:
        lines.append(f"created topic {desired.name} with {desired.partitions} partitions")
    if plan_.grow_to is not None:
        lines.append(f"grew topic {desired.name} to {plan_.grow_to} partitions")
    if plan_.config.set:
        lines.append(f"set config {', '.join(sorted(plan_.config.set))} on {desired.name}")
    if plan_.config.delete:
        lines.append(f"removed config {', '.join(plan_.config.delete)} from {desired.name}")
    return lines
