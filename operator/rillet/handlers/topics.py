"""Topic handlers: every event reconciles the object as a whole (the resync covers drift)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from rillet.api.v1alpha1 import objects
from rillet.handlers import indexes, reconciling
from rillet.reconcile import subjects, topicconfigs

KIND = "Topic"
PLURAL = "topics"
RESOURCE = (objects.GROUP, objects.VERSION, PLURAL)


def subject_for(body: Mapping[str, Any], views: indexes.Views) -> subjects.Subject:
    """Everything a Topic's reconcile needs, from its body and the indexes."""
    spec = body["spec"]
    subject = reconciling.bare_subject(KIND, body, views)
    desired = reconciling.desired_topic(
        subject,
        partitions=int(spec["partitions"]),
        replication_factor=spec.get("replicationFactor"),
        config=topicconfigs.canonical_config(dict(spec.get("config") or {})),
    )
    return reconciling.within_quotas(dataclasses.replace(subject, desired=desired), views)


reconciling.register_handlers(resource=RESOURCE, noun="topic", subject_for=subject_for)
