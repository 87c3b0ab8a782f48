"""The driver pod's wiring: the environment, files, paths and ports operator and driver share.

The operator builds the driver's StatefulSet, Service and ConfigMap with these names
(reconcile.appobjects); the runtime (`rillet drive`) reads the same ones. The Spark settings
the operator built travel in one environment variable (SPARK_CONF_ENV) as a JSON object:
`render_spark_conf` writes it, `parse_spark_conf_json` reads it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

# The pod's identity, from the downward API: (variable, fieldPath). The runtime sets
# spark.kubernetes.driver.pod.name and spark.driver.host from the first two.
POD_NAME_ENV: Final = "POD_NAME"
POD_IP_ENV: Final = "POD_IP"
POD_NAMESPACE_ENV: Final = "POD_NAMESPACE"
DOWNWARD_ENV: Final = (
    (POD_NAME_ENV, "metadata.name"),
    (POD_IP_ENV, "status.podIP"),
    (POD_NAMESPACE_ENV, "metadata.namespace"),
)
# What the operator sets: the App's name, Kafka as pods reach it, the Spark settings it built.
APP_NAME_ENV: Final = "RILLET_APP_NAME"
KAFKA_BOOTSTRAP_ENV: Final = "RILLET_KAFKA_BOOTSTRAP"
SPARK_CONF_ENV: Final = "RILLET_SPARK_CONF_JSON"

# Where the ConfigMap `<app>-run` is mounted, and its keys.
CONFIG_DIR: Final = "/etc/rillet"
RUN_SPEC_KEY: Final = "run-spec.json"
SPARK_CONF_KEY: Final = "spark-conf.json"
EXECUTOR_TEMPLATE_KEY: Final = "executor-pod-template.yaml"
RUN_SPEC_PATH: Final = f"{CONFIG_DIR}/{RUN_SPEC_KEY}"
EXECUTOR_TEMPLATE_PATH: Final = f"{CONFIG_DIR}/{EXECUTOR_TEMPLATE_KEY}"

# The checkpoint volume of the driver (a PersistentVolumeClaim), and scratch space.
CHECKPOINT_DIR: Final = "/var/lib/rillet/checkpoints"
TMP_DIR: Final = "/tmp"

# What the driver pod mounts from its ServiceAccount (automountServiceAccountToken).
SERVICE_ACCOUNT_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"

# Where Kubernetes takes the container's termination message from: the driver's last words.
TERMINATION_LOG: Final = "/dev/termination-log"

# Fixed ports: executors connect to the driver's RPC and block manager ports, so they are named
# in the Service and cannot be random.
DRIVER_RPC_PORT: Final = 7078
BLOCK_MANAGER_PORT: Final = 7079
METRICS_PORT: Final = 9090

# The runtime image's user (images/runtime/Dockerfile).
RUNTIME_UID: Final = 10001

# What the driver container runs, and the runtime image's executor entrypoint
# (images/runtime/executor-entrypoint.sh). The driver under tini, as the image's ENTRYPOINT has
# it: PID 1 drops the signals it has no handler for, so a driver stopped (deleted, suspended,
# rolled) while still starting ignored SIGTERM and was only killed when its grace period ended.
DRIVE_COMMAND: Final = ("/usr/bin/tini", "--", "rillet", "drive", RUN_SPEC_PATH)
DRIVE_ARGS: Final = ("--executor-pod-template", EXECUTOR_TEMPLATE_PATH)
EXECUTOR_COMMAND: Final = ("/opt/rillet/bin/spark-executor",)


def render_spark_conf(conf: Mapping[str, str]) -> str:
    """The conf as the JSON object the driver reads (keys sorted: the same conf, the same text)."""
    return json.dumps(dict(conf), sort_keys=True, indent=2) + "\n"


def parse_spark_conf_json(text: str | None) -> dict[str, str]:
    """SPARK_CONF_ENV as Spark settings; raises ValueError (never quoting values)."""
    if not text:
        return {}
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{SPARK_CONF_ENV} is not JSON ({error.msg})") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"{SPARK_CONF_ENV} must be a JSON object of Spark settings")
    conf: dict[str, str] = {}
    for key, value in parsed.items():
        if isinstance(value, dict | list) or value is None:
            raise ValueError(f"{SPARK_CONF_ENV}: {key} must be a string, number or boolean")
        conf[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return conf
