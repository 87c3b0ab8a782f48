"""In-memory indexes over every Topic, Table and App the operator watches (kopf indexes).

They answer, without an API call: who else claims this Kafka topic (conflicts, across
namespaces), which Apps write a Table, how many partitions a Topic declares, and the latest body
of every Topic, Table and App (what the resync, the App reconcile and the scaling loop read).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

import kopf

from rillet.api.v1alpha1 import fields, objects
from rillet.reconcile import appnotes, claims, naming
from rillet.settings import OperatorSettings

Body = TypeVar("Body", bound=Mapping[str, Any])

SETTINGS = OperatorSettings()


def kafka_name(
    kind: str, name: str, namespace: str, spec: Mapping[str, Any], status: Mapping[str, Any]
) -> str:
    """The Kafka topic name of a Topic or Table object (the one its status records, in either
    form: `naming.kafka_topic_name`)."""
    return naming.kafka_topic_name(
        object_name=name,
        namespace=namespace,
        spec_topic_name=spec.get("topicName"),
        prefix_namespace=SETTINGS.prefix_namespace,
        recorded=status.get("topicName"),
    )


def claim_of(
    kind: str, name: str, namespace: str, meta: Mapping[str, Any], status: Mapping[str, Any]
) -> claims.Claim:
    """An object's claim on its Kafka topic; the incumbent is the one Ready with it."""
    conditions = status.get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    created = str(meta["creationTimestamp"]).replace("Z", "+00:00")
    return claims.Claim(
        created=datetime.fromisoformat(created),
        challenger=not (ready and status.get("topicName")),
        uid=str(meta["uid"]),
        kind=kind,
        namespace=namespace,
        name=name,
    )


def _claim_entry(
    kind: str,
    *,
    name: str,
    namespace: str | None,
    spec: kopf.Spec,
    meta: kopf.Meta,
    status: kopf.Status,
    **_: Any,
) -> dict[str, claims.Claim]:
    """One Topic's or Table's index entry: its Kafka topic name -> its claim on it."""
    claim = claim_of(kind, name, str(namespace), meta, status)
    return {kafka_name(kind, name, str(namespace), spec, status): claim}


@kopf.index(objects.GROUP, objects.VERSION, "topics")
def topic_claims(**kwargs: Any) -> dict[str, claims.Claim]:
    return _claim_entry("Topic", **kwargs)


@kopf.index(objects.GROUP, objects.VERSION, "tables")
def table_claims(**kwargs: Any) -> dict[str, claims.Claim]:
    return _claim_entry("Table", **kwargs)


def _namespace_entry(
    kind: str, *, name: str, namespace: str | None, meta: kopf.Meta, status: kopf.Status, **_: Any
) -> dict[str, claims.Claim]:
    """One Topic's or Table's entry by namespace: what the cap on their number counts."""
    return {str(namespace): claim_of(kind, name, str(namespace), meta, status)}


@kopf.index(objects.GROUP, objects.VERSION, "topics")
def topic_namespaces(**kwargs: Any) -> dict[str, claims.Claim]:
    return _namespace_entry("Topic", **kwargs)


@kopf.index(objects.GROUP, objects.VERSION, "tables")
def table_namespaces(**kwargs: Any) -> dict[str, claims.Claim]:
    return _namespace_entry("Table", **kwargs)


@kopf.index(objects.GROUP, objects.VERSION, "topics")
def topic_partitions(
    *, name: str, namespace: str | None, spec: kopf.Spec, **_: Any
) -> dict[tuple[str, str], int]:
    return {(str(namespace), name): int(spec.get("partitions", 0))}


@kopf.index(objects.GROUP, objects.VERSION, "apps")
def table_writers(
    *, name: str, namespace: str | None, spec: kopf.Spec, **_: Any
) -> dict[tuple[str, str], tuple[str, tuple[str, ...], str | None]]:
    """(namespace, table) -> (app, names of the Topic objects it reads, the longest
    allowedLateness of its inputs), per written Table."""
    inputs = [i for i in spec.get("inputs", []) if i.get("topicRef")]
    names = tuple(str(i["topicRef"]["name"]) for i in inputs)
    lateness = _longest_lateness(inputs)
    return {
        (str(namespace), str(output["tableRef"]["name"])): (name, names, lateness)
        for output in spec.get("outputs", [])
        if output.get("tableRef")
    }


def _longest_lateness(inputs: Iterable[Mapping[str, Any]]) -> str | None:
    """The longest allowedLateness of the inputs (as written), None if none declares one; one
    that does not parse is left out (the App's own reconcile reports it)."""
    declared: list[tuple[timedelta, str]] = []
    for declared_input in inputs:
        text = (declared_input.get("eventTime") or {}).get("allowedLateness")
        if text is not None:
            with contextlib.suppress(ValueError):
                declared.append((fields.parse_duration(str(text)), str(text)))
    return max(declared)[1] if declared else None


@kopf.index("v1", "namespaces")
def namespace_pod_security(*, name: str, labels: kopf.Labels, **_: Any) -> dict[str, str]:
    """namespace -> the Pod Security level it enforces ('' for none): an App's driver starting
    in a namespace that is not `restricted` is warned about (`appnotes.pod_security_notes`)."""
    return {name: str(labels.get(appnotes.POD_SECURITY_ENFORCE, ""))}


@kopf.index(objects.GROUP, objects.VERSION, "topics")
def topic_objects(
    *, name: str, namespace: str | None, body: kopf.Body, **_: Any
) -> dict[tuple[str, str], dict[str, Any]]:
    """The latest body of every Topic: what the periodic resync reconciles."""
    return {(str(namespace), name): slim(body)}


@kopf.index(objects.GROUP, objects.VERSION, "tables")
def table_objects(
    *, name: str, namespace: str | None, body: kopf.Body, **_: Any
) -> dict[tuple[str, str], dict[str, Any]]:
    """The latest body of every Table: what the periodic resync reconciles."""
    return {(str(namespace), name): slim(body)}


@kopf.index(objects.GROUP, objects.VERSION, "apps")
def app_objects(
    *, name: str, namespace: str | None, body: kopf.Body, **_: Any
) -> dict[tuple[str, str], dict[str, Any]]:
    """The latest body of every App: what the scaling loop observes and scales."""
    return {(str(namespace), name): slim(body)}


KEPT_METADATA = (
    "name",
    "namespace",
    "uid",
    "generation",
    "resourceVersion",  # the resync's status write is conditional on it
    "creationTimestamp",
    "deletionTimestamp",
    "annotations",
)


def slim(body: Mapping[str, Any]) -> dict[str, Any]:
    """What a reconcile reads of a body; managedFields and the like can be most of its size."""
    metadata = body["metadata"]
    return {
        "apiVersion": body["apiVersion"],
        "kind": body["kind"],
        "metadata": {key: metadata[key] for key in KEPT_METADATA if key in metadata},
        "spec": dict(body.get("spec") or {}),
        "status": dict(body.get("status") or {}),
    }


@dataclass(frozen=True)
class Views:
    """The indexes a reconcile reads, as kopf passes them (live: they follow every event)."""

    topic_claims: kopf.Index[str, claims.Claim]
    table_claims: kopf.Index[str, claims.Claim]
    table_writers: kopf.Index[tuple[str, str], tuple[str, tuple[str, ...], str | None]]
    topic_partitions: kopf.Index[tuple[str, str], int]
    topic_namespaces: kopf.Index[str, claims.Claim]
    table_namespaces: kopf.Index[str, claims.Claim]

    @classmethod
    def of(cls, kwargs: dict[str, Any]) -> Views:
        """Pick the views out of a handler's keyword arguments."""
        return cls(**{name: kwargs[name] for name in cls.__dataclass_fields__})

    def rivals(self, kafka_name: str, subject: claims.Claim) -> tuple[claims.Claim, ...]:
        """Other objects, of any kind and namespace, that claim the same Kafka topic."""
        found = [*self.topic_claims.get(kafka_name, []), *self.table_claims.get(kafka_name, [])]
        return claims.rivals_of(subject, found)

    def in_namespace(self, namespace: str) -> list[claims.Claim]:
        """The claims of every Topic and Table of `namespace` (deleted ones kopf missed too)."""
        return [
            *self.topic_namespaces.get(namespace, []),
            *self.table_namespaces.get(namespace, []),
        ]


def newest(bodies: Iterable[Body]) -> Body | None:
    """The newest of the bodies under one key: several are an object and a deleted predecessor
    kopf missed (see `claims`). None if there are none. Of equals, the last."""
    found: Body | None = None
    for body in bodies:
        created = str((body.get("metadata") or {}).get("creationTimestamp") or "")
        if found is None or created >= str(found["metadata"].get("creationTimestamp") or ""):
            found = body
    return found


def newest_of_each(index: kopf.Index[Any, Any]) -> list[Any]:
    """The newest body under each key of an index of bodies."""
    found = (newest(list(store)) for store in list(index.values()))
    return [body for body in found if body is not None]


def _latest(
    index: kopf.Index[tuple[str, str], dict[str, Any]], key: tuple[str, str]
) -> dict[str, Any] | None:
    return newest(list(index.get(key, [])))


@dataclass(frozen=True)
class AppViews:
    """The indexes an App's reconcile and the scaling loop read (live, like `Views`)."""

    topic_objects: kopf.Index[tuple[str, str], dict[str, Any]]
    table_objects: kopf.Index[tuple[str, str], dict[str, Any]]
    app_objects: kopf.Index[tuple[str, str], dict[str, Any]]
    namespace_pod_security: kopf.Index[str, str] = field(default_factory=lambda: cast(Any, {}))

    @classmethod
    def of(cls, kwargs: dict[str, Any]) -> AppViews:
        """Pick the views out of a handler's keyword arguments."""
        return cls(**{name: kwargs[name] for name in cls.__dataclass_fields__})

    def topic(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The latest body of a Topic, None if there is none."""
        return _latest(self.topic_objects, (namespace, name))

    def table(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The latest body of a Table, None if there is none."""
        return _latest(self.table_objects, (namespace, name))

    def pod_security(self, namespace: str) -> str | None:
        """The Pod Security level `namespace` enforces ('' for none); None: not seen yet."""
        levels = list(self.namespace_pod_security.get(namespace, []))
        return levels[-1] if levels else None

    def kafka_name(self, kind: str, body: Mapping[str, Any]) -> str:
        """The Kafka topic name of a Topic or Table object (`kafka_name`)."""
        meta = body["metadata"]
        return kafka_name(
            kind,
            str(meta["name"]),
            str(meta["namespace"]),
            body.get("spec") or {},
            body.get("status") or {},
        )

    def apps(self) -> list[dict[str, Any]]:
        """The latest body of every App."""
        return newest_of_each(self.app_objects)
