"""The periodic resync: every Topic and Table re-checked against Kafka, in batches.

One operator-wide loop rather than a kopf timer per object: kopf puts a finalizer on every
object that has a timer, and a Retain object must have none (nothing to clean up, so nothing may
block its deletion, or its namespace's, when the operator is down). The loop reads the latest
bodies from kopf's indexes and queues every object at once, so the syncer batches them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

import kopf

from rillet import metrics
from rillet.handlers import indexes, reconciling, tables, topics
from rillet.k8s.writing import ObjectWriter
from rillet.kafka.syncing import TopicSyncer
from rillet.reconcile import statuses, subjects

log = logging.getLogger(__name__)

SubjectBuilder = Callable[[Mapping[str, Any], indexes.Views], subjects.Subject]


async def resync_forever(
    *,
    interval: float,
    views: indexes.Views,
    objects: Mapping[str, tuple[kopf.Index[Any, Any], SubjectBuilder]],
    syncer: TopicSyncer,
    writer: ObjectWriter,
) -> None:
    """Every `interval` seconds, reconcile every known object; runs until cancelled."""
    while True:
        await asyncio.sleep(interval)
        bodies = {plural: indexes.newest_of_each(index) for plural, (index, _) in objects.items()}
        for plural, found in bodies.items():
            managed = [
                body
                for body in found
                if not body["metadata"].get("deletionTimestamp")
                and subjects.is_managed(body["metadata"].get("annotations") or {})
            ]
            metrics.MANAGED_TOPICS.labels(plural).set(len(managed))
        jobs = [
            resync_one(plural, body, objects[plural][1], views, syncer, writer)
            for plural, found in bodies.items()
            for body in found
            if statuses.is_due(body)
        ]
        with metrics.RESYNC_SECONDS.time():
            results = await asyncio.gather(*jobs, return_exceptions=True)
        metrics.RESYNCS.inc()
        for failure in (r for r in results if isinstance(r, BaseException)):
            log.warning("resync of an object failed: %s", failure)


async def resync_one(
    plural: str,
    body: Mapping[str, Any],
    build: SubjectBuilder,
    views: indexes.Views,
    syncer: TopicSyncer,
    writer: ObjectWriter,
) -> None:
    subject = build(body, views)
    report = await reconciling.reconcile(subject, syncer, resync=True)
    if report is None:
        return
    metadata = body["metadata"]
    if report.status_patch:
        written = await writer.patch_status(
            plural,
            metadata["namespace"],
            metadata["name"],
            report.status_patch,
            resource_version=metadata.get("resourceVersion"),
        )
        if not written:
            return  # the object changed since this pass read it: its own reconcile reports
    for note in report.notes:
        await writer.post_event(
            dict(body), type_=note.type, reason=note.reason, message=note.message
        )


KINDS: dict[str, tuple[str, SubjectBuilder]] = {
    topics.PLURAL: ("topic_objects", topics.subject_for),
    tables.PLURAL: ("table_objects", tables.subject_for),
}
