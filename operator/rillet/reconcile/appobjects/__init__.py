"""Pure: the Kubernetes objects of one App, as plain dicts ready for server-side apply.

A ServiceAccount and a RoleBinding of the chart's driver ClusterRole (the driver's identity), a
ConfigMap (run spec, Spark conf,
executor pod template), a headless Service, a NetworkPolicy and a StatefulSet of one driver pod;
Spark creates the executor pods from the template. Each object is built by an ordered tuple of
small option functions, each adding one concern, as the Spark operator builds spark-submit
arguments.

- `contexts`: the inputs (App, run spec, `AppEnvironment`), fixed paths and ports, checkpoint;
- `fragments`: merging what the options return;
- `metadata`: labels, selectors, owner references;
- `rbac`, `sparkconfs`, `pods` (shared pod parts, executor template), `drivers` (ConfigMap,
  Service, StatefulSet, spec hash), `networkpolicies` (who reaches the App's pods);
- `credentials` (the App's Kafka principal), `registrycredentials` (the schema registry's
  Secret of an Avro App), `sparkauth` (the key of Spark's traffic within the App): Secrets
  built without data, which the reconcile fills;
- `building`: all of them at once (`build_app_objects`).

Part of `reconcile`, so pure: imported by the rest of `reconcile`, by `k8s.applying` (which
applies the objects) and by `handlers`.
"""

from __future__ import annotations

from rillet.reconcile.appobjects.building import AppObjects as AppObjects
from rillet.reconcile.appobjects.building import build_app_objects as build_app_objects
from rillet.reconcile.appobjects.contexts import AppEnvironment as AppEnvironment
from rillet.reconcile.appobjects.contexts import checkpoint_location as checkpoint_location
from rillet.reconcile.appobjects.sparkconfs import (
    build_driver_spark_conf as build_driver_spark_conf,
)
