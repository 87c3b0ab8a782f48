"""Table handlers: the changelog topic of a Table, reconciled like a Topic's.

Its partitions default to the input partitions of the App that writes it, found through the
Apps index; until one is known (and spec.partitions is unset) the Table waits, and says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pydantic

from rillet.api.v1alpha1 import objects, tables
from rillet.handlers import indexes, reconciling
from rillet.reconcile import specproblems, subjects, tableservers
from rillet.reconcile import tables as table_planning

KIND = "Table"
PLURAL = "tables"
RESOURCE = (objects.GROUP, objects.VERSION, PLURAL)


def _writers(namespace: str, name: str, views: indexes.Views) -> list[table_planning.Writer]:
    writers = []
    for app, input_topics, lateness in views.table_writers.get((namespace, name), []):
        counts = tuple(
            count
            for topic in input_topics
            for count in views.topic_partitions.get((namespace, topic), [])
            if count
        )
        writers.append(table_planning.Writer(app=app, input_partitions=counts, lateness=lateness))
    return writers


def subject_for(body: Mapping[str, Any], views: indexes.Views) -> subjects.Subject:
    """Everything a Table's reconcile needs, from its body and the indexes."""
    metadata = body["metadata"]
    name, namespace = str(metadata["name"]), str(metadata["namespace"])
    subject = reconciling.bare_subject(KIND, body, views)
    try:
        spec = tables.TableSpec.model_validate(dict(body.get("spec") or {}), strict=False)
    except pydantic.ValidationError as error:
        return dataclasses.replace(subject, invalid=specproblems.one_line(error))
    writers = _writers(namespace, name, views)
    choice = table_planning.choose_partitions(spec, writers)
    desired = None
    if choice.partitions is not None:
        desired = reconciling.desired_topic(
            subject,
            partitions=choice.partitions,
            replication_factor=spec.replication_factor,
            config=table_planning.changelog_config(spec, writers),
        )
    subject = reconciling.within_quotas(
        dataclasses.replace(
            subject,
            desired=desired,
            waiting=choice.waiting_for,
            warnings=tuple(
                (reason, message)
                for reason, message in (
                    ("NotCoPartitioned", choice.warning),
                    ("ExpiryShorterThanLateness", table_planning.expiry_warning(spec, writers)),
                )
                if message is not None
            ),
            extra_status={
                "windowed": spec.window is not None,
                "writers": sorted(w.app for w in writers) or None,
            },
        ),
        views,
    )
    # Only a Table that owns its topic is served (handlers.tableserving).
    served = spec.serve and tableservers.ownership_refusal(subjects.gate(subject)) is None
    server = tableservers.server_status(name, namespace) if served else None
    return dataclasses.replace(subject, extra_status={**subject.extra_status, "server": server})


reconciling.register_handlers(resource=RESOURCE, noun="table", subject_for=subject_for)
