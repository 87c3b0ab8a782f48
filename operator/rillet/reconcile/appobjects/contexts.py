"""What every builder of an App's objects reads: the App, its run spec, and where it runs.

`AppEnvironment` holds the operator's settings that shape the objects; `AppContext` bundles them
with the App and its resolved run spec, and is the single argument of every option function.
The fixed paths and ports of the driver and executor pods are the contract's
(`driverapi.wiring`), so the Spark conf, the pod specs, the Service and the runtime agree on them.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from dataclasses import dataclass
from typing import Final, Literal

from rillet.api.v1alpha1 import apps
from rillet.driverapi import runspecs, wiring
from rillet.reconcile import parallelisms, scaling, scalingdecisions

PullPolicy = Literal["Always", "IfNotPresent", "Never"]
# What the chart names the driver ClusterRole in a release of namespace `rillet`; the chart
# sets the name of its own (RILLET_APP_DRIVER_CLUSTER_ROLE).
DEFAULT_DRIVER_CLUSTER_ROLE: Final = "rillet-rillet-operator-driver"

# A checkpoint location with a scheme is remote storage (s3a://, hdfs://, gs://, abfs://...).
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True, kw_only=True)
class AppEnvironment:
    """Operator settings that shape every App's objects."""

    kafka_bootstrap: str
    image_pull_policy: PullPolicy = "IfNotPresent"
    storage_class: str | None = None  # None: the cluster's default StorageClass
    checkpoint_size: str = "1Gi"
    apiserver_url: str = "https://kubernetes.default.svc:443"
    # Set when each App logs in to Kafka as its own principal (kafkaaccess): the driver mounts
    # the App's Kafka Secret and the run spec says how to use it.
    kafka_login: runspecs.KafkaLogin | None = None
    # With kafka_login: the short id of this Kubernetes cluster in the Apps' SCRAM user names
    # (kafkaaccess.cluster_id), read by the operator at start-up.
    kafka_cluster: str = ""
    # The schema registry as drivers reach it, for the run specs of Apps that use Avro; with a
    # credentials_dir when the operator has credentials (registrycredentials mounts them there).
    schema_registry: runspecs.SchemaRegistry | None = None
    # The operator's cap on any App's executors (quotas a platform team sets); None: none.
    max_executors_per_app: int | None = None
    # matchLabels (sorted pairs) of the namespaces that may scrape a driver's metrics; (): none.
    monitoring_namespace_labels: tuple[tuple[str, str], ...] = ()
    # The ClusterRole every App's driver is bound to in its namespace (the chart's, rbac).
    driver_cluster_role: str = DEFAULT_DRIVER_CLUSTER_ROLE


@dataclass(frozen=True, kw_only=True)
class AppContext:
    """One App, its run spec (checkpoint resolved for the driver pod) and the environment."""

    app: apps.App
    run_spec: runspecs.RunSpec
    env: AppEnvironment
    # What the App's stages are known to run at once (partitions Kafka last reported, the
    # state's partitions its driver last reported), which bounds the executors a driver starts
    # with; None: only what the Topics declare is known.
    parallelism: parallelisms.Parallelism | None = None

    @property
    def name(self) -> str:
        """The App's name, which every object name derives from."""
        return str(self.app.metadata.name)

    @property
    def namespace(self) -> str:
        """The namespace of the App and all of its objects."""
        return self.run_spec.namespace

    @property
    def uid(self) -> str:
        """The App's uid, for the ownerReferences of its objects."""
        return str(self.app.metadata.uid)

    @property
    def spec(self) -> apps.AppSpec:
        """The App's spec."""
        return self.app.spec

    @property
    def starting_executors(self) -> int:
        """The executors a driver starts with: minExecutors within the cap of the widest stage
        known (at most one when nothing is known), so that not even a driver's first second
        runs an executor past the partitions."""
        declared = declared_parallelism(self.run_spec)
        known = self.parallelism or declared
        if known.input_partitions is None:  # Kafka not read yet: what the Topics declare
            known = dataclasses.replace(known, input_partitions=declared.input_partitions)
        policy = scalingdecisions.policy_for(
            self.spec.scaling, quota=self.env.max_executors_per_app
        )
        return scaling.starting_executors(
            policy, parallelisms.parallelism_cap(known, policy.executor_cores)
        )

    @property
    def checkpoint_volume(self) -> bool:
        """Whether the driver keeps its checkpoint on a volume of its own (no URL given)."""
        return uses_checkpoint_volume(self.app)


def remote_checkpoint(app: apps.App) -> str | None:
    """The App's checkpoint URL when it names remote storage (a scheme other than file)."""
    location = app.spec.checkpoint.location if app.spec.checkpoint else None
    if location is None or not _URL.match(location) or location.startswith("file:"):
        return None
    return location


def uses_checkpoint_volume(app: apps.App) -> bool:
    """Whether the App's checkpoint lives on the driver's PersistentVolumeClaim."""
    return remote_checkpoint(app) is None


def checkpoint_location(app: apps.App) -> str:
    """Where the driver keeps the App's checkpoint.

    A URL as given; otherwise a directory on the checkpoint volume: the App's name by default,
    or the given path taken relative to the volume (normalized, so it cannot leave it).
    """
    remote = remote_checkpoint(app)
    if remote is not None:
        return remote
    given = (app.spec.checkpoint and app.spec.checkpoint.location) or str(app.metadata.name)
    path = given.removeprefix("file://").removeprefix("file:")
    if path == wiring.CHECKPOINT_DIR or path.startswith(wiring.CHECKPOINT_DIR + "/"):
        path = path.removeprefix(wiring.CHECKPOINT_DIR)
    # normpath of an absolute path never climbs above "/": "../x" stays on the volume.
    return wiring.CHECKPOINT_DIR + posixpath.normpath("/" + path.lstrip("/")).rstrip("/")


def declared_parallelism(run_spec: runspecs.RunSpec) -> parallelisms.Parallelism:
    """The input partitions the App's Topics declare (unknown if an input's are not declared)."""
    partitions = parallelisms.total_partitions(i.partitions for i in run_spec.stream_inputs)
    return parallelisms.Parallelism(input_partitions=partitions)


def build_context(
    app: apps.App,
    run_spec: runspecs.RunSpec,
    env: AppEnvironment,
    *,
    parallelism: parallelisms.Parallelism | None = None,
) -> AppContext:
    """The context of one App; its run spec's checkpoint location is where the driver keeps it.

    Raises ValueError for an App without name or uid (not read from the apiserver) and for a
    run spec carrying Kafka credentials (it goes into a ConfigMap, readable by the namespace).
    """
    if not app.metadata.name or not app.metadata.uid:
        raise ValueError("the App needs metadata.name and metadata.uid (as read from the cluster)")
    _refuse_credentials(run_spec)
    resolved = run_spec.model_copy(update={"checkpoint_location": checkpoint_location(app)})
    return AppContext(app=app, run_spec=resolved, env=env, parallelism=parallelism)


# Kafka client settings that carry secrets (sasl.jaas.config, ssl.key.password, ...).
_SECRET_MARKERS = ("password", "jaas", "secret", "token")


def _refuse_credentials(run_spec: runspecs.RunSpec) -> None:
    secrets = [key for key in run_spec.kafka_config if any(m in key for m in _SECRET_MARKERS)]
    if secrets:
        raise ValueError(
            f"the run spec carries Kafka credentials ({', '.join(sorted(secrets))}); they would "
            "be written to the App's ConfigMap: pass them to the driver from a Secret instead"
        )
