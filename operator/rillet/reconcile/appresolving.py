"""Pure: an App resolved against its Topics, Tables and the operator's environment.

The first step of an App's reconcile (`handlers.appreconciling`), decidable without I/O: the App
model, its references (missing or not Ready: WaitingForTopics), its run spec, co-partitioning of
its stream inputs and the Tables it writes, and its objects. Bad input is a value here, never an
exception: a ValueError of a builder is a Stalled InvalidSpec with its message. The Topics and
Tables come from `ObjectViews` (kopf's in-memory indexes, read, never asked over the network).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from rillet.api.v1alpha1 import apps, objects, tables, topics
from rillet.driverapi import runspecs
from rillet.reconcile import appobjects, appobservations, kafkaaccess, runresolving, specproblems
from rillet.reconcile.appobjects import registrycredentials
from rillet.settings import AppSettings, KafkaSettings, SchemaRegistrySettings

TopicOrTable = TypeVar("TopicOrTable", topics.Topic, tables.Table)


class ObjectViews(Protocol):
    """The latest Topics and Tables an App may reference, and their Kafka topics' names
    (`handlers.ObjectViews`)."""

    def topic(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The latest body of a Topic, None if there is none."""

    def table(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The latest body of a Table, None if there is none."""

    def kafka_name(self, kind: str, body: Mapping[str, Any]) -> str:
        """The Kafka topic name of a Topic or Table object."""


def kafka_login(settings: AppSettings, kafka: KafkaSettings) -> runspecs.KafkaLogin | None:
    """How App drivers log in to Kafka: as the App's own principal when those are on.

    Raises ValueError when they are on but the operator does not log in with SASL/SCRAM: its
    admin rights create the Apps' SCRAM users, on the listener the Apps use too.
    """
    if not settings.kafka_principals:
        return None
    protocol, mechanism = kafka.security_protocol, kafka.sasl_mechanism
    if protocol not in ("SASL_SSL", "SASL_PLAINTEXT") or mechanism not in (
        "SCRAM-SHA-256",
        "SCRAM-SHA-512",
    ):
        raise ValueError(
            "per-App Kafka principals (RILLET_APP_KAFKA_PRINCIPALS) need the operator to log in "
            "with SASL/SCRAM: set kafka.securityProtocol to SASL_SSL and kafka.saslMechanism to "
            f"SCRAM-SHA-512 (now {protocol}, {mechanism or 'no mechanism'})"
        )
    return runspecs.KafkaLogin.model_validate(
        {
            "security_protocol": protocol,
            "sasl_mechanism": mechanism,
            "credentials_dir": kafkaaccess.CREDENTIALS_DIR,
            "ca": kafka.ssl_ca_location is not None,
        }
    )


def schema_registry(
    settings: SchemaRegistrySettings, *, credentials_dir: str | None
) -> runspecs.SchemaRegistry | None:
    """The registry as drivers reach it, None when the operator has none.

    `credentials_dir`: where drivers find the credentials, when the operator has some (in a pod,
    registrycredentials.CREDENTIALS_DIR; `rillet run` gives None: the driver reads them from
    its environment). Only the directory goes in the run spec, never the credentials.
    """
    if not settings.url:  # unset, or set empty
        return None
    return runspecs.SchemaRegistry(
        url=settings.url,
        credentials_dir=credentials_dir if settings.username else None,
        request_timeout_seconds=settings.request_timeout_seconds,
    )


def environment(
    settings: AppSettings,
    kafka: KafkaSettings,
    registry: SchemaRegistrySettings,
    *,
    apiserver_url: str,
    kafka_cluster: str = "",
) -> appobjects.AppEnvironment:
    """The environment every App's objects are built for; `kafka_cluster`: this cluster's id
    in the Apps' SCRAM users (kafkaaccess.cluster_id), needed with per-App principals."""
    return appobjects.AppEnvironment(
        kafka_bootstrap=settings.kafka_bootstrap or kafka.bootstrap,
        image_pull_policy=settings.image_pull_policy,
        storage_class=settings.storage_class,
        checkpoint_size=settings.checkpoint_size,
        apiserver_url=settings.apiserver_url or apiserver_url,
        kafka_login=kafka_login(settings, kafka),
        kafka_cluster=kafka_cluster,
        schema_registry=schema_registry(
            registry, credentials_dir=registrycredentials.CREDENTIALS_DIR
        ),
        max_executors_per_app=settings.max_executors_per_app,
        monitoring_namespace_labels=tuple(sorted(settings.monitoring_namespace_labels.items())),
        driver_cluster_role=settings.driver_cluster_role,
    )


@dataclass(frozen=True)
class Resolution:
    """What resolving an App concluded; `objects` only when it may run."""

    objects: appobjects.AppObjects | None = None
    spec_problems: tuple[str, ...] = ()
    references: appobservations.ReferenceCheck = field(
        default_factory=appobservations.ReferenceCheck
    )
    copartitioning: tuple[str, ...] = ()
    blocking_problem: tuple[str, str] | None = None  # (reason, message): see appstatus


def _parse_app(body: Mapping[str, Any]) -> apps.App:
    meta = body["metadata"]
    kept = {key: meta.get(key) for key in ("name", "namespace", "uid", "generation")}
    # Of the annotations, only those the App's objects depend on (the rotation token).
    asked = {
        key: str(value)
        for key, value in (meta.get("annotations") or {}).items()
        if key == kafkaaccess.ROTATE_ANNOTATION
    }
    return apps.App.model_validate(
        {
            "apiVersion": objects.API_VERSION,
            "kind": "App",
            "metadata": {**kept, **({"annotations": asked} if asked else {})},
            "spec": dict(body.get("spec") or {}),
        }
    )


def _with_kafka_name(
    model: type[TopicOrTable], kind: str, body: Mapping[str, Any], views: ObjectViews
) -> TopicOrTable:
    """A Topic or Table model whose topicName is its Kafka name (prefixed, when the operator
    prefixes)."""
    meta, spec = body["metadata"], dict(body.get("spec") or {})
    found = model.model_validate(
        {"metadata": {"name": meta["name"], "namespace": meta["namespace"]}, "spec": spec}
    )
    kafka = views.kafka_name(kind, body)
    return found.model_copy(update={"spec": found.spec.model_copy(update={"topic_name": kafka})})


def _table_partitions(body: Mapping[str, Any]) -> int | None:
    """A Table's partitions: as declared, else as its changelog topic has them."""
    declared = (body.get("spec") or {}).get("partitions")
    return declared or (body.get("status") or {}).get("partitions")


def _referenced(
    body: Mapping[str, Any], views: ObjectViews
) -> dict[appobservations.Reference, Mapping[str, Any]]:
    namespace = str(body["metadata"]["namespace"])
    found: dict[appobservations.Reference, Mapping[str, Any]] = {}
    for kind, name in appobservations.references(body.get("spec") or {}):
        referenced = (
            views.topic(namespace, name) if kind == "Topic" else views.table(namespace, name)
        )
        if referenced is not None:
            found[(kind, name)] = referenced
    return found


def _run_spec(
    app: apps.App,
    found: Mapping[appobservations.Reference, Mapping[str, Any]],
    env: appobjects.AppEnvironment,
    views: ObjectViews,
) -> runspecs.RunSpec:
    return runresolving.build_run_spec(
        app,
        topics_by_name={
            name: _with_kafka_name(topics.Topic, kind, b, views)
            for (kind, name), b in found.items()
            if kind == "Topic"
        },
        tables_by_name={
            name: _with_kafka_name(tables.Table, kind, b, views)
            for (kind, name), b in found.items()
            if kind == "Table"
        },
        bootstrap_servers=env.kafka_bootstrap,
        checkpoint_location=appobjects.checkpoint_location(app),
        namespace=str(app.metadata.namespace),
        kafka_login=env.kafka_login,
        schema_registry=env.schema_registry,
    )


def _copartitioning(
    run_spec: runspecs.RunSpec,
    spec: Mapping[str, Any],
    found: Mapping[appobservations.Reference, Mapping[str, Any]],
) -> tuple[str, ...]:
    return appobservations.copartitioning_problems(
        [(i.name, i.partitions) for i in run_spec.stream_inputs],
        [
            (name, _table_partitions(found[("Table", name)]))
            for name in appobservations.written_tables(spec)
        ],
    )


def resolve(
    body: Mapping[str, Any], views: ObjectViews, env: appobjects.AppEnvironment
) -> Resolution:
    """Everything about the App decidable without I/O, down to its objects."""
    spec = body.get("spec") or {}
    try:
        app = _parse_app(body)
    except ValueError as error:
        return Resolution(spec_problems=(specproblems.one_line(error),))
    found = _referenced(body, views)
    check = appobservations.check_references(appobservations.references(spec), found)
    if not check.ok:
        return Resolution(references=check)
    try:
        run_spec = _run_spec(app, found, env, views)
        problems = _copartitioning(run_spec, spec, found)
        if problems:
            return Resolution(copartitioning=problems)
        known = appobservations.known_parallelism(body.get("status"))
        return Resolution(
            objects=appobjects.build_app_objects(app, run_spec, env, parallelism=known)
        )
    except ValueError as error:  # the models' and builders' way of refusing a spec
        return Resolution(spec_problems=(specproblems.one_line(error),))
