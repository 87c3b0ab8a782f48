"""Spark's own traffic in an App: authenticated and encrypted with a secret of the App alone.

The driver's RPC and block manager ports (7078, 7079) and every executor's accept only peers
that prove they hold the App's secret (`spark.authenticate`), and what they exchange (tasks with
their Kafka options, shuffle and state blocks) is encrypted: AES-GCM, with version 2 of Spark's
key agreement (SPARK-47172; the defaults, AES-CTR and version 1, are kept by Spark only for
compatibility). No SASL fallback: every peer is this App's.

The key is a Secret `<app>-spark-auth`, made once by the operator with 32 random bytes
(`handlers.appreconciling`, before the driver exists) and owned by the App; built here without
data, as the other Secrets of an App. Left to itself, Spark generates a key in the driver and
hands it to each executor as the environment variable SPARK_AUTHENTICATE_SECRET, in clear in the
executor pod's spec, readable by anyone who may read pods. Instead:
- the driver reads the key from the Secret mounted as a file
  (`spark.authenticate.secret.driver.file`; Spark then adds no such variable to executor pods);
- each executor gets SPARK_AUTHENTICATE_SECRET as a reference to the Secret (`secretKeyRef`):
  an executor checks a key file only once the driver's settings have reached it, and it needs
  the key before, to fetch them. A key read from a file is its bytes in base64, so the Secret
  holds that form too, for the executors.
"""

from __future__ import annotations

import base64
from typing import Any, Final

from rillet.reconcile import naming
from rillet.reconcile.appobjects import contexts, fragments, metadata

VOLUME: Final = "spark-auth"
SECRET_DIR: Final = "/var/run/secrets/rillet/spark-auth"
FILE_KEY: Final = "key"  # the random bytes, as the driver reads them
ENV_KEY: Final = "key-base64"  # as Spark makes a key of them, for the executors' variable
SECRET_PATH: Final = f"{SECRET_DIR}/{FILE_KEY}"
SECRET_BYTES: Final = 32
# Spark's name (SecurityManager.ENV_AUTH_SECRET).
ENV_VARIABLE: Final = "SPARK_AUTHENTICATE_SECRET"


def build_secret(context: contexts.AppContext) -> dict[str, Any]:
    """The App's Spark secret without its data (the reconcile adds it when it creates it)."""
    name = naming.app_spark_auth_secret_name(context.name)
    return {
        **metadata.header(context, api_version="v1", kind="Secret", name=name),
        "type": "Opaque",
    }


def with_key(secret: dict[str, Any], key: bytes) -> dict[str, Any]:
    """The Secret holding `key` (random bytes of the caller's making), as it is created."""
    spark_form = base64.b64encode(key)
    data = {FILE_KEY: spark_form, ENV_KEY: base64.b64encode(spark_form)}
    return {**secret, "data": {name: value.decode() for name, value in data.items()}}


def spark_conf(context: contexts.AppContext) -> dict[str, str]:
    """Settings Rillet owns: authentication from the mounted file, encryption on."""
    return {
        "spark.authenticate": "true",
        # Both set, or Spark refuses; with the executor's set, it gives executors no key of its
        # own in their environment. Executors have no such file: their variable comes first.
        "spark.authenticate.secret.driver.file": SECRET_PATH,
        "spark.authenticate.secret.executor.file": SECRET_PATH,
        "spark.network.crypto.enabled": "true",
        "spark.network.crypto.cipher": "AES/GCM/NoPadding",
        "spark.network.crypto.authEngineVersion": "2",
        "spark.network.crypto.saslFallback": "false",
    }


def volume(context: contexts.AppContext) -> fragments.Fragment:
    """Pod option (the driver): the App's Spark key, readable by the runtime's group (fsGroup)
    alone."""
    secret = {"secretName": naming.app_spark_auth_secret_name(context.name), "defaultMode": 0o440}
    return {"spec": {"volumes": [{"name": VOLUME, "secret": secret}]}}


def mount(context: contexts.AppContext) -> fragments.Fragment:
    """Container option (the driver): the key's file at SECRET_PATH."""
    return {"volumeMounts": [{"name": VOLUME, "mountPath": SECRET_DIR, "readOnly": True}]}


def executor_env(context: contexts.AppContext) -> fragments.Fragment:
    """Container option (executors): the key in Spark's variable, as a reference to the Secret
    (the pod spec holds its name, not the key)."""
    ref = {"name": naming.app_spark_auth_secret_name(context.name), "key": ENV_KEY}
    return {"env": [{"name": ENV_VARIABLE, "valueFrom": {"secretKeyRef": ref}}]}
