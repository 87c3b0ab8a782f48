"""Spark's traffic within an App: authenticated and encrypted with the App's own key, read as a
file by the driver and the executors, held by a Secret the App owns, reserved from sparkConf.

Ground truth is Spark's: with `spark.authenticate.secret.executor.file` unset, Spark's executor
pod builder puts the key in clear in the executor's environment (_SPARK_AUTH_SECRET), and
a driver with only one of the driver and executor files set refuses to start.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from rillet.api.v1alpha1 import appsparkconf
from rillet.reconcile.appobjects import contexts, pods, sparkauth
from tests.unit import wordcount_inputs

ENV = wordcount_inputs.ENV
KEY_DIR = "/var/run/secrets/rillet/spark-auth"


_objects = wordcount_inputs.objects


def _mounts(pod_spec: dict[str, Any]) -> dict[str, str]:
    """Where each container of a pod spec mounts the Secret volumes, by Secret name."""
    secrets = {
        v["name"]: v["secret"]["secretName"] for v in pod_spec.get("volumes", []) if "secret" in v
    }
    return {
        secrets[m["name"]]: m["mountPath"]
        for c in pod_spec["containers"]
        for m in c.get("volumeMounts", [])
        if m["name"] in secrets
    }


def test_spark_traffic_is_authenticated_and_encrypted_with_the_apps_key() -> None:
    conf = _objects().spark_conf

    assert conf["spark.authenticate"] == "true"
    # Both, or Spark refuses to start; the executor's, or Spark gives executors the key in clear.
    for side in ("driver", "executor"):
        assert conf[f"spark.authenticate.secret.{side}.file"] == f"{KEY_DIR}/key"
    assert "spark.authenticate.secret" not in conf
    assert conf["spark.network.crypto.enabled"] == "true"
    assert conf["spark.network.crypto.cipher"] == "AES/GCM/NoPadding"
    assert conf["spark.network.crypto.authEngineVersion"] == "2"
    assert conf["spark.network.crypto.saslFallback"] == "false"


@pytest.mark.parametrize("checkpoint", [None, {"location": "s3a://bucket/wc"}])
def test_the_driver_reads_the_key_file_and_executors_a_reference_to_it(
    checkpoint: dict[str, str] | None,
) -> None:
    spec: dict[str, Any] = {"checkpoint": checkpoint} if checkpoint else {}
    objects = _objects(**spec)
    driver = objects.stateful_set["spec"]["template"]["spec"]
    executor = pods.build_executor_pod_template(
        contexts.build_context(*wordcount_inputs.inputs(**spec), ENV)
    )["spec"]

    assert _mounts(driver)["wordcount-spark-auth"] == KEY_DIR
    (volume,) = [v for v in driver["volumes"] if v["name"] == "spark-auth"]
    assert volume["secret"]["defaultMode"] == 0o440  # the runtime's group (fsGroup) alone
    assert _mounts(executor) == {}
    (container,) = executor["containers"]
    (variable,) = [e for e in container["env"] if e["name"] == "_SPARK_AUTH_SECRET"]
    assert variable == {
        "name": "_SPARK_AUTH_SECRET",
        "valueFrom": {"secretKeyRef": {"name": "wordcount-spark-auth", "key": "key-base64"}},
    }


def test_the_apps_key_secret_is_owned_by_the_app_and_built_without_its_key() -> None:
    objects = _objects()
    secret = objects.spark_auth_secret

    assert (secret["kind"], secret["metadata"]["name"]) == ("Secret", "wordcount-spark-auth")
    (owner,) = secret["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "App",
        "wordcount",
        wordcount_inputs.UID,
        True,
    )
    assert "data" not in secret
    rendered = json.dumps([*objects.in_apply_order(), objects.spark_conf])
    made = sparkauth.with_key(secret, bytes(range(32)))
    assert not [value for value in made["data"].values() if value in rendered]


def test_executors_get_the_key_spark_makes_of_the_drivers_file() -> None:
    """Spark's driver uses base64 of the key file's bytes (SecurityManager.secretKeyFromFile); an
    executor uses its variable as it is."""
    key = bytes(range(32))
    data = sparkauth.with_key(_objects().spark_auth_secret, key)["data"]

    file_bytes = base64.b64decode(data["key"])  # as the kubelet writes the file
    variable = base64.b64decode(data["key-base64"]).decode()  # as it sets the variable
    assert file_bytes == key
    assert variable == base64.b64encode(file_bytes).decode()


def test_an_app_can_not_set_any_of_it_in_spark_conf() -> None:
    for key in sparkauth.spark_conf(contexts.build_context(*wordcount_inputs.inputs(), ENV)):
        assert appsparkconf.SECURITY.holds(key), key
    assert appsparkconf.SECURITY.holds("spark.authenticate.secret")
