"""Pod parts shared by the driver and the executors, and the executor pod template.

Both kinds of pod meet the restricted Pod Security Standard: the runtime image's non-root user,
no privilege escalation, no capabilities, the RuntimeDefault seccomp profile. Both get an
emptyDir at /tmp (the JVM and Python write there), and the App's Spark key (`sparkauth`: a
file in the driver, a reference to the Secret in executors). Executors get no ServiceAccount
token: only the driver talks to the apiserver.

Executors of an App with a checkpoint volume mount the driver's claim at the same path: Spark's
state stores (aggregations, joins, windows) are written by the executors under the checkpoint
directory, next to the driver's offsets and commits. The claim is ReadWriteOnce, which a node
grants to every pod on it, so executors are required onto the driver's node; spreading them
over nodes takes a remote checkpoint (`spec.checkpoint.location: s3a://...`). With one, nothing
ties an executor to a node, and they are spread over nodes (the scheduler's preference, never a
reason to leave one pending): an App's tasks then share no node's cores unless they must.

With an s3a:// checkpoint and its `secretRef`, the driver and executors get the object store's
key pair as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, which S3A's default credential chain
reads: as secretKeyRefs, so the values stay in the Secret, out of every object Rillet writes.

Spark builds each executor pod from the template (`executor-pod-template.yaml` of the App's
ConfigMap): it keeps the container named `spark-executor` with its command, and sets image,
args, environment, ports and resources from its conf (the same values as here).
"""

from __future__ import annotations

from typing import Any, Final

from rillet.driverapi import wiring
from rillet.reconcile import naming
from rillet.reconcile.appobjects import contexts, fragments, metadata, sparkauth, sparkconfs

CONFIG_VOLUME: Final = "config"
TMP_VOLUME: Final = "tmp"
CHECKPOINT_VOLUME: Final = "checkpoint"


def pod_security_context() -> dict[str, Any]:
    """Pod-level security: the runtime user, its group owning mounted volumes."""
    return {
        "runAsNonRoot": True,
        "runAsUser": wiring.RUNTIME_UID,
        "runAsGroup": wiring.RUNTIME_UID,
        "fsGroup": wiring.RUNTIME_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    """Container-level security: no escalation, no capabilities."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def hardened(context: contexts.AppContext) -> fragments.Fragment:
    """Container option: the restricted securityContext."""
    return {"securityContext": container_security_context()}


def restricted(context: contexts.AppContext) -> fragments.Fragment:
    """Pod option: the restricted pod securityContext."""
    return {"spec": {"securityContext": pod_security_context()}}


def tmp_volume(context: contexts.AppContext) -> fragments.Fragment:
    """Pod option: an emptyDir for /tmp."""
    return {"spec": {"volumes": [{"name": TMP_VOLUME, "emptyDir": {}}]}}


def tmp_mount(context: contexts.AppContext) -> fragments.Fragment:
    """Container option: /tmp on its emptyDir."""
    return {"volumeMounts": [{"name": TMP_VOLUME, "mountPath": wiring.TMP_DIR}]}


def _executor_container_name(context: contexts.AppContext) -> fragments.Fragment:
    return {"name": sparkconfs.EXECUTOR_CONTAINER, "command": list(wiring.EXECUTOR_COMMAND)}


def _executor_resources(context: contexts.AppContext) -> fragments.Fragment:
    memory = str(context.spec.executor.memory)
    return {
        "resources": {
            "requests": {"cpu": sparkconfs.executor_cpu(context.spec), "memory": memory},
            "limits": {"memory": memory},
        }
    }


def checkpoint_mount(context: contexts.AppContext) -> fragments.Fragment:
    """Container option: the checkpoint volume, if the App has one."""
    if not context.checkpoint_volume:
        return {}
    return {"volumeMounts": [{"name": CHECKPOINT_VOLUME, "mountPath": wiring.CHECKPOINT_DIR}]}


# The environment variables of the key pair, as S3A's default credential chain reads them
# (the AWS SDK's EnvironmentVariableCredentialsProvider).
ACCESS_KEY_ID_ENV: Final = "AWS_ACCESS_KEY_ID"
SECRET_ACCESS_KEY_ENV: Final = "AWS_SECRET_ACCESS_KEY"


def checkpoint_credentials(context: contexts.AppContext) -> fragments.Fragment:
    """Container option: the object store's key pair from checkpoint.secretRef, if given, as
    references to the Secret (see above)."""
    checkpoint = context.spec.checkpoint
    if checkpoint is None or checkpoint.secret_ref is None:
        return {}
    ref = checkpoint.secret_ref
    keys = (
        (ACCESS_KEY_ID_ENV, ref.access_key_id_key),
        (SECRET_ACCESS_KEY_ENV, ref.secret_access_key_key),
    )
    return {
        "env": [
            {"name": name, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": key}}}
            for name, key in keys
        ]
    }


EXECUTOR_CONTAINER_OPTIONS: Final[tuple[fragments.Option, ...]] = (
    _executor_container_name,
    hardened,
    _executor_resources,
    tmp_mount,
    checkpoint_mount,
    checkpoint_credentials,
    sparkauth.executor_env,
)


def _executor_header(context: contexts.AppContext) -> fragments.Fragment:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": metadata.pod_labels(context.name, "executor")},
    }


def _no_api_access(context: contexts.AppContext) -> fragments.Fragment:
    # Executors never call the apiserver; service links would only add env vars per Service.
    return {"spec": {"automountServiceAccountToken": False, "enableServiceLinks": False}}


def _driver_checkpoint_claim(context: contexts.AppContext) -> fragments.Fragment:
    """The driver's checkpoint claim, and the driver's node to share it on (see above)."""
    if not context.checkpoint_volume:
        return {}
    claim = {"claimName": naming.app_checkpoint_claim_name(context.name)}
    beside_driver = {
        "labelSelector": {"matchLabels": metadata.selector(context.name, "driver")},
        "topologyKey": "kubernetes.io/hostname",
    }
    return {
        "spec": {
            "volumes": [{"name": CHECKPOINT_VOLUME, "persistentVolumeClaim": claim}],
            "affinity": {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [beside_driver]}
            },
        }
    }


def _spread_over_nodes(context: contexts.AppContext) -> fragments.Fragment:
    """Executors free to run anywhere (a remote checkpoint) spread over nodes (see above)."""
    if context.checkpoint_volume:
        return {}
    spread = {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": metadata.selector(context.name, "executor")},
    }
    return {"spec": {"topologySpreadConstraints": [spread]}}


def _executor_container(context: contexts.AppContext) -> fragments.Fragment:
    return {"spec": {"containers": [fragments.build(context, EXECUTOR_CONTAINER_OPTIONS)]}}


EXECUTOR_POD_OPTIONS: Final[tuple[fragments.Option, ...]] = (
    _executor_header,
    restricted,
    _no_api_access,
    tmp_volume,
    _driver_checkpoint_claim,
    _spread_over_nodes,
    _executor_container,
)


def build_executor_pod_template(context: contexts.AppContext) -> dict[str, Any]:
    """The executor pod template (a Pod) Spark creates executors from."""
    return fragments.build(context, EXECUTOR_POD_OPTIONS)
