"""Topic handlers: every event reconciles the object as a whole (the resync covers drift)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rillet.api.v1alpha1 import objects
from rillet.handlers import indexes, reconciling
from rillet.reconcile import subjects, topicconfigs
from rillet.reconcile.topics import DesiredTopic

KIND = "Topic"
PLURAL = "topics"
RESOURCE = (objects.GROUP, objects.VERSION, PLURAL)


def subject_for(body: Mapping[str, Any], views: indexes.Views) -> subjects.Subject:
    """Everything a Topic's reconcile needs, from its body and the indexes."""
    metadata, spec = body["metadata"], body["spec"]
    name, namespace = str(metadata["name"]), str(metadata["namespace"])
    kafka_name = indexes.kafka_name(KIND, name, namespace, spec)
    claim = indexes.claim_of(KIND, name, namespace, metadata, body.get("status") or {})
    return subjects.Subject(
        kind=KIND,
        body=body,
        kafka_name=kafka_name,
        claim=claim,
        rivals=views.rivals(kafka_name, claim),
        desired=DesiredTopic(
            name=kafka_name,
            partitions=int(spec["partitions"]),
            replication_factor=spec.get("replicationFactor"),
            config=topicconfigs.canonical_config(dict(spec.get("config") or {})),
            source=(claim.uid, int(metadata.get("generation") or 0)),
        ),
    )


reconciling.register_handlers(resource=RESOURCE, noun="topic", subject_for=subject_for)
