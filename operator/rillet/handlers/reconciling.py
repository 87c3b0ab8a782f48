"""The one reconcile flow Topics and Tables share: decide, sync the topic, derive a report.

A reconcile yields a `notes.Report`: the status patch (empty when nothing changed) and the Events
to post (only for changes and new problems, never once per resync). kopf handlers apply it through
kopf's patch and event poster; the periodic resync through `rillet.k8s.writing`. Both kinds
register the same kopf handlers (`register_handlers`): only how a body becomes a Subject differs.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import kopf

from rillet import metrics
from rillet.handlers import deleting, indexes
from rillet.kafka.syncing import TopicSyncer
from rillet.reconcile import notes, quotas, statuses, subjects, topicownership
from rillet.reconcile.topics import DesiredTopic, SyncOutcome

MAX_RETRY_DELAY = 60.0
# The annotations a user sets on a Topic or Table to ask for work.
USER_ANNOTATIONS = (topicownership.ADOPT, subjects.MANAGED, subjects.PAUSED)


def notice_annotation(**_: Any) -> None:
    """No work of its own: reconcile_object, run for the same change, does it."""


def bare_subject(kind: str, body: Mapping[str, Any], views: indexes.Views) -> subjects.Subject:
    """A Topic's or Table's Subject before its kind says what it asks of Kafka: its Kafka topic
    name, its claim on it and the rivals of that claim."""
    metadata = body["metadata"]
    name, namespace = str(metadata["name"]), str(metadata["namespace"])
    kafka_name = indexes.kafka_name(
        kind, name, namespace, body.get("spec") or {}, body.get("status") or {}
    )
    claim = indexes.claim_of(kind, name, namespace, metadata, body.get("status") or {})
    return subjects.Subject(
        kind=kind,
        body=body,
        kafka_name=kafka_name,
        claim=claim,
        rivals=views.rivals(kafka_name, claim),
    )


def within_quotas(subject: subjects.Subject, views: indexes.Views) -> subjects.Subject:
    """The subject, with the operator-wide cap it is over, if any (`quotas`)."""
    settings = indexes.SETTINGS
    limits = quotas.TopicQuotas(
        partitions_per_topic=settings.max_partitions_per_topic,
        topics_per_namespace=settings.max_topics_per_namespace,
    )
    found = views.in_namespace(subject.claim.namespace)
    # Ranked only when the namespace holds more objects than the cap: with fewer, none is over
    # it, and ranking every object against all the others on each resync is quadratic.
    over = len(found) > limits.topics_per_namespace
    problem = quotas.problem(
        limits,
        namespace=subject.claim.namespace,
        partitions=subject.desired.partitions if subject.desired is not None else None,
        older=quotas.older_in_namespace(subject.claim, found) if over else 0,
    )
    return dataclasses.replace(subject, over_quota=problem)


def desired_topic(
    subject: subjects.Subject,
    *,
    partitions: int,
    replication_factor: int | None,
    config: dict[str, str],
) -> DesiredTopic:
    """The Kafka topic a subject asks for, as declared by this generation of it."""
    return DesiredTopic(
        name=subject.kafka_name,
        partitions=partitions,
        replication_factor=replication_factor,
        config=config,
        source=(subject.claim.uid, int(subject.metadata.get("generation") or 0)),
        wish=subjects.wish_of(subject, release=indexes.SETTINGS.release),
    )


async def reconcile(
    subject: subjects.Subject, syncer: TopicSyncer, *, resync: bool = False
) -> notes.Report | None:
    """Reconcile one object end to end (Kafka included) and report; None when a newer change
    of the object was handled instead (nothing to report about this older one)."""
    started = time.monotonic()
    outcome = SyncOutcome()
    verdict = subjects.gate(subject)
    if verdict is None:
        assert subject.desired is not None
        outcome = await syncer.sync(subject.desired, resync=resync)
        if outcome.superseded:
            return None
        verdict = statuses.topic_verdict(outcome, kafka_name=subject.kafka_name)
    status_patch = subjects.derive_status_patch(subject, verdict, outcome, now=datetime.now(UTC))
    posted = subjects.derive_notes(subject, verdict, outcome)
    if status_patch:
        posted += tuple(
            notes.Note("Warning", reason, message) for reason, message in subject.warnings
        )
    metrics.RECONCILES.labels(subject.kind, verdict.reason).inc()
    metrics.RECONCILE_SECONDS.labels(subject.kind).observe(time.monotonic() - started)
    if verdict.state == "stalled" or verdict.reason == "KafkaUnavailable":
        metrics.RECONCILE_ERRORS.labels(subject.kind, verdict.reason).inc()
    return notes.Report(status_patch, posted, verdict)


def apply_in_handler(
    report: notes.Report | None, body: kopf.Body, patch: kopf.Patch, *, retry: int
) -> None:
    """Hand a report to kopf: status into the handler's patch, Events to kopf's poster."""
    if report is None:
        return
    for key, value in report.status_patch.items():
        patch.status[key] = value
    for note in report.notes:
        kopf.event(body, type=note.type, reason=note.reason, message=note.message)
    verdict = report.verdict
    if verdict is not None and verdict.reason == "KafkaUnavailable":
        # kopf retries with this backoff; the status written above says what is going on.
        raise kopf.TemporaryError(verdict.message, delay=min(2.0**retry, MAX_RETRY_DELAY))


def register_handlers(
    *,
    resource: tuple[str, str, str],
    noun: str,
    subject_for: Callable[[Mapping[str, Any], indexes.Views], subjects.Subject],
) -> None:
    """Register a kind's kopf handlers, by the ids the operator's log names (`reconcile_topic`,
    `delete_topic`): every event reconciles the object as a whole (the resync covers drift);
    deleting it deletes its Kafka topic only when its deletionPolicy asks (`deleting`)."""

    async def reconcile_object(
        body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, retry: int, **kwargs: Any
    ) -> None:
        subject = subject_for(body, indexes.Views.of(kwargs))
        report = await reconcile(subject, memo.syncer)
        apply_in_handler(report, body, patch, retry=retry)

    async def delete_object(body: kopf.Body, memo: kopf.Memo, retry: int, **kwargs: Any) -> None:
        subject = subject_for(body, indexes.Views.of(kwargs))
        await deleting.delete_topic(body, subject, syncer=memo.syncer, retry=retry)

    # kopf leaves annotations under its storage prefix (rillet.io/) out of the changes it
    # reacts to; a field handler of each the user sets brings it back (lifecycle.ProgressStorage):
    # adding rillet.io/adopt to a Stalled Topic is then an update, reconciled at once.
    for annotation in USER_ANNOTATIONS:
        field = ("metadata", "annotations", annotation)
        notice_id = f"notice_{noun}_{annotation.rsplit('/', 1)[1]}"  # notice_topic_adopt
        kopf.on.field(*resource, field=field, id=notice_id)(notice_annotation)
    # The order stacked decorators registered them in: update, create, resume.
    kopf.on.update(*resource, id=f"reconcile_{noun}")(reconcile_object)
    kopf.on.create(*resource, id=f"reconcile_{noun}")(reconcile_object)
    kopf.on.resume(*resource, id=f"reconcile_{noun}")(reconcile_object)
    kopf.on.delete(*resource, id=f"delete_{noun}", when=deleting.wants_topic_deleted)(delete_object)
