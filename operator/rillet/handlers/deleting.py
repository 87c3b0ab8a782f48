"""Deleting a Kafka topic when its object goes, only when asked, and never wedging anything.

The finalizer exists only on objects whose deletionPolicy is Delete (and that are managed): a
Retain object has nothing to clean up, so it can always go, with or without the operator. When
Kafka refuses the deletion, or stays unreachable through a few retries, the topic is kept, an
Event says so, and the finalizer is released: a namespace never hangs in Terminating.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from rillet.handlers import indexes
from rillet.kafka.errors import KafkaUnavailableError
from rillet.kafka.syncing import TopicSyncer
from rillet.reconcile import subjects

UNAVAILABLE_RETRIES = 3


def retry_while_unreachable(error: KafkaUnavailableError, *, retry: int) -> None:
    """Retry a cleanup Kafka could not serve, UNAVAILABLE_RETRIES times with growing delays;
    return once they are spent: the caller then lets the object go and says what it kept."""
    if retry < UNAVAILABLE_RETRIES:
        raise kopf.TemporaryError(f"Kafka unreachable: {error}", delay=5 * (retry + 1)) from error


def wants_topic_deleted(spec: kopf.Spec, annotations: Mapping[str, str], **_: Any) -> bool:
    return spec.get("deletionPolicy") == "Delete" and subjects.is_managed(annotations)


async def delete_topic(
    body: kopf.Body, subject: subjects.Subject, *, syncer: TopicSyncer, retry: int
) -> None:
    """Delete the subject's topic unless another object claims it, or its name or spec is one
    Rillet refuses; never block the deletion."""
    refusal = subjects.deletion_refusal(subject)
    if refusal is not None:
        kopf.warn(
            body,
            reason="TopicNotDeleted",
            message=f"Kafka topic {subject.kafka_name} is kept: {refusal}",
        )
        return
    if subject.rivals:
        kopf.info(
            body,
            reason="TopicKept",
            message=f"Kafka topic {subject.kafka_name} is kept: {subject.rivals[0].reference} also "
            f"claims it",
        )
        return
    try:
        # Only a topic Rillet recorded as this object's own: never one it refused to adopt.
        claim = subjects.claim_record(subject, release=indexes.SETTINGS.release)
        refused = await syncer.deletion_refusal(claim, subject.kafka_name)
        if refused is not None:
            kopf.warn(
                body,
                reason="TopicNotDeleted",
                message=f"Kafka topic {subject.kafka_name} is kept: {refused}",
            )
            return
        failure = await syncer.delete(subject.kafka_name, owner=subject.claim.uid)
    except KafkaUnavailableError as error:
        retry_while_unreachable(error, retry=retry)
        kopf.warn(
            body,
            reason="TopicNotDeleted",
            message=f"Kafka topic {subject.kafka_name} was not deleted: Kafka stayed unreachable "
            f"({error}). Delete it by hand if it should go.",
        )
        return
    if failure is not None:
        kopf.warn(
            body,
            reason="TopicNotDeleted",
            message=f"Kafka refused to delete topic {subject.kafka_name} ({failure.message}); "
            f"the object is deleted and the topic kept",
        )
        return
    kopf.info(body, reason="TopicDeleted", message=f"deleted Kafka topic {subject.kafka_name}")
