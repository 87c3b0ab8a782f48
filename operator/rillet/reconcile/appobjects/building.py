"""All Kubernetes objects of one App, in the order to apply them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rillet.api.v1alpha1 import apps
from rillet.driverapi import runspecs
from rillet.reconcile import parallelisms
from rillet.reconcile.appobjects import (
    contexts,
    credentials,
    drivers,
    networkpolicies,
    rbac,
    registrycredentials,
    sparkauth,
    sparkconfs,
)


@dataclass(frozen=True, kw_only=True)
class AppObjects:
    """The objects of one App as plain dicts, ready for server-side apply."""

    service_account: dict[str, Any]
    role_binding: dict[str, Any]
    config_map: dict[str, Any]
    service: dict[str, Any]
    network_policy: dict[str, Any]
    stateful_set: dict[str, Any]
    spec_hash: str
    spark_conf: dict[str, str]
    # The key of Spark's traffic, without its data: created once, before these objects.
    spark_auth_secret: dict[str, Any]
    # The App's own Kafka principal, provisioned before these objects are applied.
    kafka_access: credentials.KafkaAccess | None = None
    # The schema registry's credentials for an Avro App's driver, without their data: the
    # reconcile adds it and applies the Secret before these objects (handlers.appregistry).
    registry_secret: dict[str, Any] | None = None
    # What an older release made and this one deletes, when the App owns it (rbac).
    legacy: tuple[dict[str, Any], ...] = ()

    def in_apply_order(self) -> tuple[dict[str, Any], ...]:
        """Identity and permissions first, the ConfigMap before the pod that reads it, the
        NetworkPolicy before any pod it admits to."""
        return (
            self.service_account,
            self.role_binding,
            self.config_map,
            self.service,
            self.network_policy,
            self.stateful_set,
        )


def build_app_objects(
    app: apps.App,
    run_spec: runspecs.RunSpec,
    env: contexts.AppEnvironment,
    *,
    parallelism: parallelisms.Parallelism | None = None,
) -> AppObjects:
    """The objects of `app` (metadata.name, namespace via the run spec, and uid required).

    The run spec's checkpoint location is replaced by where the driver keeps it
    (contexts.checkpoint_location). `parallelism`: what the App is known to run at once (see
    contexts.AppContext). Raises ValueError as contexts.build_context does.
    """
    context = contexts.build_context(app, run_spec, env, parallelism=parallelism)
    return AppObjects(
        service_account=rbac.build_service_account(context),
        role_binding=rbac.build_role_binding(context),
        config_map=drivers.build_config_map(context),
        service=drivers.build_service(context),
        network_policy=networkpolicies.build_network_policy(context),
        stateful_set=drivers.build_stateful_set(context),
        spec_hash=drivers.spec_hash(context),
        spark_conf=sparkconfs.build_spark_conf(context),
        spark_auth_secret=sparkauth.build_secret(context),
        kafka_access=credentials.build_kafka_access(context),
        registry_secret=registrycredentials.build_secret(context),
        legacy=rbac.legacy_objects(context),
    )
