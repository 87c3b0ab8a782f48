"""The driver of an App: its ConfigMap, headless Service and StatefulSet of one pod.

The StatefulSet gives the driver a stable name and its checkpoint volume; podManagementPolicy
Parallel lets a replaced pod start without waiting for ordinals. `spec.suspend` sets replicas
to 0 (stopping the driver deletes its executors, the checkpoint stays).

What restarts the driver: the pod template's `rillet.io/spec-hash` annotation hashes everything
the driver reads at start (run spec, Spark conf, executor template, image, resources), so a
change to any of them rolls the pod, while the ConfigMap (not part of the template) is read at
start. Settings that change while the App runs (the executor count) or follow the partition
count are left out of the hash, and the Spark conf reaches the pod from the ConfigMap rather
than inline: changing minExecutors or growing a topic updates the ConfigMap for the next start
without restarting a running driver.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

import yaml

from rillet.driverapi import runspecs, wiring
from rillet.reconcile import kafkaaccess, naming
from rillet.reconcile.appobjects import (
    contexts,
    credentials,
    fragments,
    metadata,
    pods,
    registrycredentials,
    sparkauth,
    sparkconfs,
)

DRIVER_CONTAINER: Final = "driver"
KAFKA_CREDENTIALS_VOLUME: Final = "kafka-credentials"
# SIGTERM asks the driver to stop its queries at the end of a batch: give a batch time to end.
TERMINATION_GRACE_SECONDS: Final = 60

# (name, port): executors reach the driver on the first two, Prometheus scrapes the third.
DRIVER_PORTS: Final = (
    ("driver-rpc", wiring.DRIVER_RPC_PORT),
    ("blockmanager", wiring.BLOCK_MANAGER_PORT),
    ("metrics", wiring.METRICS_PORT),
)


def render_run_spec(context: contexts.AppContext) -> str:
    """The run spec as the JSON file the driver reads (runspecs.render)."""
    return runspecs.render(context.run_spec)


def render_executor_template(context: contexts.AppContext) -> str:
    """The executor pod template as the YAML file Spark reads."""
    return yaml.safe_dump(pods.build_executor_pod_template(context), sort_keys=False)


def spec_hash(context: contexts.AppContext) -> str:
    """sha256 of what the driver reads at start, without what may change while it runs.

    Left out: the executor count (scaled live), and what follows the input partition counts
    (inputs[].partitions and the derived shuffle partitions: Spark's Kafka source finds new
    partitions itself, and a checkpoint keeps its shuffle partitions). Run-spec fields at their
    defaults are left out too, so an operator upgrade that adds a field restarts no driver.
    """
    material = {
        "runSpec": hashed_run_spec(context.run_spec),
        "sparkConf": sparkconfs.hashed(sparkconfs.build_spark_conf(context)),
        "executorPodTemplate": pods.build_executor_pod_template(context),
        "image": context.spec.image,
        "imagePullPolicy": context.env.image_pull_policy,
        "driver": context.spec.driver.model_dump(mode="json"),
        "kafkaBootstrap": context.env.kafka_bootstrap,
    }
    text = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def hashed_run_spec(run_spec: runspecs.RunSpec) -> dict[str, Any]:
    """The part of the run spec that restarts the driver when it changes (see spec_hash)."""
    hashed = run_spec.model_dump(mode="json", exclude={"shuffle_partitions"}, exclude_defaults=True)
    for item in hashed["inputs"]:
        item.pop("partitions", None)
    return hashed


def build_config_map(context: contexts.AppContext) -> dict[str, Any]:
    """The ConfigMap `<app>-run`: run spec, Spark conf and executor pod template."""
    name = naming.app_run_config_name(context.name)
    header = metadata.header(context, api_version="v1", kind="ConfigMap", name=name)
    return {
        **header,
        "data": {
            wiring.RUN_SPEC_KEY: render_run_spec(context),
            wiring.SPARK_CONF_KEY: wiring.render_spark_conf(sparkconfs.build_spark_conf(context)),
            wiring.EXECUTOR_TEMPLATE_KEY: render_executor_template(context),
        },
    }


def build_service(context: contexts.AppContext) -> dict[str, Any]:
    """The headless Service `<app>-driver`: a stable DNS name for the driver pod."""
    name = naming.app_driver_name(context.name)
    header = metadata.header(context, api_version="v1", kind="Service", name=name)
    return {
        **header,
        "spec": {
            "clusterIP": "None",
            "selector": metadata.selector(context.name, "driver"),
            # Executors may look the driver up while it starts, before its readiness probe passes.
            "publishNotReadyAddresses": True,
            "ports": [
                {"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}
                for port_name, port in DRIVER_PORTS
            ],
        },
    }


# The driver container, one concern per option.


def _driver_image(context: contexts.AppContext) -> fragments.Fragment:
    return {
        "name": DRIVER_CONTAINER,
        "image": context.spec.image,
        "imagePullPolicy": context.env.image_pull_policy,
    }


def _drive_command(context: contexts.AppContext) -> fragments.Fragment:
    return {"command": list(wiring.DRIVE_COMMAND), "args": list(wiring.DRIVE_ARGS)}


def _downward_env(context: contexts.AppContext) -> fragments.Fragment:
    return {
        "env": [
            {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
            for name, path in wiring.DOWNWARD_ENV
        ]
    }


def _rillet_env(context: contexts.AppContext) -> fragments.Fragment:
    conf_ref = {"name": naming.app_run_config_name(context.name), "key": wiring.SPARK_CONF_KEY}
    return {
        "env": [
            {"name": wiring.APP_NAME_ENV, "value": context.name},
            {"name": wiring.KAFKA_BOOTSTRAP_ENV, "value": context.env.kafka_bootstrap},
            # From the ConfigMap, read at container start: see the module docstring.
            {"name": wiring.SPARK_CONF_ENV, "valueFrom": {"configMapKeyRef": conf_ref}},
        ]
    }


def _driver_ports(context: contexts.AppContext) -> fragments.Fragment:
    return {
        "ports": [
            {"name": name, "containerPort": port, "protocol": "TCP"} for name, port in DRIVER_PORTS
        ]
    }


def _driver_resources(context: contexts.AppContext) -> fragments.Fragment:
    cpu, memory = str(context.spec.driver.cpu), str(context.spec.driver.memory)
    return {"resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}}}


def _termination_message(context: contexts.AppContext) -> fragments.Fragment:
    # A driver that dies without writing the message file still shows its last log lines.
    return {"terminationMessagePolicy": "FallbackToLogsOnError"}


def _driver_mounts(context: contexts.AppContext) -> fragments.Fragment:
    config = {"name": pods.CONFIG_VOLUME, "mountPath": wiring.CONFIG_DIR, "readOnly": True}
    return {"volumeMounts": [config, *pods.checkpoint_mount(context).get("volumeMounts", [])]}


def _kafka_credentials_mount(context: contexts.AppContext) -> fragments.Fragment:
    # Files, not environment variables: they stay out of the pod spec, `kubectl describe` and
    # /proc/<pid>/environ. Executors need none: Spark hands them the Kafka options.
    if context.env.kafka_login is None:
        return {}
    mount = {
        "name": KAFKA_CREDENTIALS_VOLUME,
        "mountPath": context.env.kafka_login.credentials_dir,
        "readOnly": True,
    }
    return {"volumeMounts": [mount]}


def _driver_readiness(context: contexts.AppContext) -> fragments.Fragment:
    return {
        # The metrics port opens once the App's queries have fixed the offsets they start from
        # (runtime.driver.driving.run): records written after Ready are read, even from `latest`.
        "readinessProbe": {
            "tcpSocket": {"port": "metrics"},
            "periodSeconds": 5,
            "failureThreshold": 3,
        }
    }


DRIVER_CONTAINER_OPTIONS: Final[tuple[fragments.Option, ...]] = (
    _driver_image,
    _drive_command,
    _downward_env,
    _rillet_env,
    _driver_ports,
    _driver_resources,
    pods.hardened,
    _termination_message,
    _driver_mounts,
    _kafka_credentials_mount,
    registrycredentials.credentials_mount,
    pods.checkpoint_credentials,
    pods.tmp_mount,
    sparkauth.mount,
    _driver_readiness,
)


# The driver pod template, one concern per option.


def _driver_pod_metadata(context: contexts.AppContext) -> fragments.Fragment:
    return {
        "metadata": {
            "labels": metadata.pod_labels(context.name, "driver"),
            "annotations": {
                metadata.SPEC_HASH_ANNOTATION: spec_hash(context),
                "kubectl.kubernetes.io/default-container": DRIVER_CONTAINER,
                **credentials.rotation_annotations(context),
            },
        }
    }


def _driver_identity(context: contexts.AppContext) -> fragments.Fragment:
    # The token is how Spark's Kubernetes backend authenticates (sparkconfs._authentication).
    return {
        "spec": {
            "serviceAccountName": naming.app_driver_name(context.name),
            "automountServiceAccountToken": True,
            "enableServiceLinks": False,
        }
    }


def _graceful_stop(context: contexts.AppContext) -> fragments.Fragment:
    return {"spec": {"terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS}}


def _config_volume(context: contexts.AppContext) -> fragments.Fragment:
    config_map = {"name": naming.app_run_config_name(context.name)}
    return {"spec": {"volumes": [{"name": pods.CONFIG_VOLUME, "configMap": config_map}]}}


def _kafka_credentials_volume(context: contexts.AppContext) -> fragments.Fragment:
    if context.env.kafka_login is None:
        return {}
    secret = {
        "secretName": kafkaaccess.secret_name(context.name),
        # Readable by the runtime's group (fsGroup) alone.
        "defaultMode": 0o440,
    }
    return {"spec": {"volumes": [{"name": KAFKA_CREDENTIALS_VOLUME, "secret": secret}]}}


def _driver_container(context: contexts.AppContext) -> fragments.Fragment:
    return {"spec": {"containers": [fragments.build(context, DRIVER_CONTAINER_OPTIONS)]}}


DRIVER_POD_OPTIONS: Final[tuple[fragments.Option, ...]] = (
    _driver_pod_metadata,
    _driver_identity,
    pods.restricted,
    _graceful_stop,
    _config_volume,
    _kafka_credentials_volume,
    registrycredentials.credentials_volume,
    pods.tmp_volume,
    sparkauth.volume,
    _driver_container,
)


def build_driver_pod_template(context: contexts.AppContext) -> dict[str, Any]:
    """The driver's pod template (metadata and spec)."""
    return fragments.build(context, DRIVER_POD_OPTIONS)


# The StatefulSet, one concern per option.


def _stateful_set_header(context: contexts.AppContext) -> fragments.Fragment:
    name = naming.app_driver_name(context.name)
    return metadata.header(context, api_version="apps/v1", kind="StatefulSet", name=name)


def _replicas(context: contexts.AppContext) -> fragments.Fragment:
    return {"spec": {"replicas": 0 if context.spec.suspend else 1}}


def _stable_identity(context: contexts.AppContext) -> fragments.Fragment:
    return {
        "spec": {
            "serviceName": naming.app_driver_name(context.name),
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": metadata.selector(context.name, "driver")},
        }
    }


def _pod_template(context: contexts.AppContext) -> fragments.Fragment:
    return {"spec": {"template": build_driver_pod_template(context)}}


def _checkpoint_claim(context: contexts.AppContext) -> fragments.Fragment:
    if not context.checkpoint_volume:
        return {}
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": context.env.checkpoint_size}},
    }
    if context.env.storage_class is not None:
        claim_spec["storageClassName"] = context.env.storage_class
    claim = {
        "metadata": {"name": pods.CHECKPOINT_VOLUME, "labels": metadata.labels(context.name)},
        "spec": claim_spec,
    }
    return {"spec": {"volumeClaimTemplates": [claim]}}


STATEFUL_SET_OPTIONS: Final[tuple[fragments.Option, ...]] = (
    _stateful_set_header,
    _replicas,
    _stable_identity,
    _pod_template,
    _checkpoint_claim,
)


def build_stateful_set(context: contexts.AppContext) -> dict[str, Any]:
    """The StatefulSet `<app>-driver`: one driver pod, its checkpoint volume unless remote."""
    return fragments.build(context, STATEFUL_SET_OPTIONS)


def _claim_shape(claim: Any) -> tuple[Any, ...]:
    spec = claim.get("spec") or {}
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    name = (claim.get("metadata") or {}).get("name")
    return name, tuple(spec.get("accessModes") or ()), str(storage), spec.get("storageClassName")


def _immutable_parts(stateful_set: Any) -> dict[str, Any]:
    spec = stateful_set.get("spec") or {}
    return {
        "serviceName": spec.get("serviceName"),
        "podManagementPolicy": spec.get("podManagementPolicy") or "OrderedReady",
        "selector": spec.get("selector"),
        "volumeClaimTemplates": [_claim_shape(c) for c in spec.get("volumeClaimTemplates") or ()],
    }


def replacement_reasons(observed: Any, desired: Any) -> list[str]:
    """The immutable StatefulSet fields that differ between the cluster's and the desired one.

    Non-empty: the apiserver refuses the update, so the StatefulSet must be deleted (orphaning
    nothing of value: the PVC stays) and created anew. Compares only what the apiserver does
    not default, e.g. a claim's size and StorageClass, not its volumeMode.
    """
    before, after = _immutable_parts(observed), _immutable_parts(desired)
    return [field for field in before if before[field] != after[field]]
