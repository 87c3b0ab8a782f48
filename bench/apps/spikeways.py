"""The three ways the spike is run: an App the operator scales (Rillet's lag scaling, or
fixed), and the same App's objects with Spark's dynamic allocation where no operator watches.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import NewTopic

from bench.apps import benches, manifests, observing, settings
from rillet.api.v1alpha1 import apps, objects, topics
from rillet.driverapi import wiring
from rillet.reconcile import appobjects, naming, runresolving
from rillet_devstack import driverroles, installs


@dataclass(frozen=True)
class Way:
    label: str
    namespace: str
    app: str
    source: str
    unwatched: bool = False  # no operator: Spark's dynamic allocation alone sizes it


def spike_scaling(minimum: int) -> dict[str, Any]:
    return {
        "minExecutors": minimum,
        "maxExecutors": settings.CAP,
        "executorCores": 1,
        "lagTarget": settings.SPIKE_LAG_TARGET,
        "stabilizationWindowSeconds": settings.SPIKE_STABILIZATION_SECONDS,
    }


def operated_way(b: benches.Bench, namespace: str, label: str, app: str, minimum: int) -> Way:
    """An App the operator runs, with its Topics."""
    source, target = f"{b.run}-{app}-in", f"{b.run}-{app}-out"
    b.apply(
        manifests.copying_pipeline(
            app,
            namespace,
            b.image,
            source=source,
            target=target,
            partitions=settings.CAP,
            sleep_ms=settings.SPIKE_SLEEP_MS,
            executor_cpu=b.fitting_cpu(settings.CAP),
            scaling=spike_scaling(minimum),
        )
    )
    return Way(label, namespace, app, source)


def dynamic_allocation_way(b: benches.Bench, namespace: str, app: str) -> Way:
    """The same App's objects, built as the operator builds them, with Spark's dynamic
    allocation in the driver's Spark conf; its App has no status (no operator watches the
    namespace), so the driver asks Spark for no executor count of its own."""
    source, target = f"{b.run}-{app}-in", f"{b.run}-{app}-out"
    futures = b.admin.create_topics([NewTopic(t, settings.CAP, 1) for t in (source, target)])
    for future in futures.values():
        future.result(timeout=60)
    manifest = installs.copying_app(
        app,
        namespace,
        b.image,
        source=source,
        target=target,
        sleep_ms=settings.SPIKE_SLEEP_MS,
        executor_cpu=b.fitting_cpu(settings.CAP),
        scaling=spike_scaling(1),
    )
    created = b.custom.create_namespaced_custom_object(
        settings.GROUP, settings.VERSION, namespace, "apps", manifest
    )
    meta = created["metadata"]
    model = apps.App.model_validate(
        {
            "apiVersion": objects.API_VERSION,
            "kind": "App",
            "metadata": {k: meta.get(k) for k in ("name", "namespace", "uid", "generation")},
            "spec": created["spec"],
        }
    )
    topic_models = {
        t: topics.Topic.model_validate(
            {"metadata": {"name": t, "namespace": namespace}, "spec": {"partitions": settings.CAP}}
        )
        for t in (source, target)
    }
    run_spec = runresolving.build_run_spec(
        model,
        topics_by_name=topic_models,
        tables_by_name={},
        bootstrap_servers=b.bootstrap,
        checkpoint_location=appobjects.checkpoint_location(model),
        namespace=namespace,
    )
    env = appobjects.AppEnvironment(
        kafka_bootstrap=b.bootstrap,
        apiserver_url=b.apiserver_url,
        driver_cluster_role=driverroles.ensure(b.state.kubeconfig),
    )
    built = appobjects.build_app_objects(model, run_spec, env)
    config_map = copy.deepcopy(built.config_map)
    spark_conf = {**built.spark_conf, **settings.DYNAMIC_ALLOCATION}
    config_map["data"][wiring.SPARK_CONF_KEY] = wiring.render_spark_conf(spark_conf)
    b.apply(
        [
            built.service_account,
            built.role_binding,
            config_map,
            built.service,
            built.stateful_set,
        ]
    )
    return Way("Spark dynamic allocation", namespace, app, source, unwatched=True)


def check_unwatched(b: benches.Bench, way: Way) -> None:
    """No operator handled the dynamic-allocation App (one watching every namespace would have
    written its status, which the driver obeys, and its ConfigMap): the figures would lie."""
    status = observing.app_body(b, way.namespace, way.app).get("status") or {}
    # The CRD defaults status.observedGeneration to 0 (kstatus reads an unseen App as
    # InProgress): anything more was written by an operator.
    written = {
        key: value for key, value in status.items() if (key, value) != ("observedGeneration", 0)
    }
    name = naming.app_run_config_name(way.app)
    data = b.core.read_namespaced_config_map(name, way.namespace).data
    conf = json.loads(data[wiring.SPARK_CONF_KEY])
    if written or conf.get("spark.dynamicAllocation.enabled") != "true":
        raise RuntimeError(
            f"an operator handles namespace {way.namespace} (App status {written}): stop it, "
            "the dynamic-allocation baseline needs a namespace nobody watches"
        )
