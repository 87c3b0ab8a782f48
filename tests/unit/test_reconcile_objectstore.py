"""An App whose checkpoint is in an object store (s3a://): its objects and Spark conf (pure).

Test plan:
- with checkpoint.secretRef, the driver container and the executor template's container get
  AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY as references to the named Secret's keys (custom
  key names followed); no env var of either carries a literal value, and neither the ConfigMap
  nor the Spark conf names an S3A key setting; without secretRef (workload identity) neither
  pod gets those variables;
- an s3a:// location gets Spark's S3A checkpoint file manager; an endpoint adds itself, path-style
  access and TLS as its scheme says; a volume or another scheme keeps the default manager and no
  S3A setting; the App's sparkConf wins over each of these;
- executors of a remote checkpoint spread over nodes (hostname, skew 1, ScheduleAnyway, the App's
  executors); with the checkpoint volume they stay beside the driver, without a spread; the
  driver of a remote checkpoint claims no volume.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from rillet.reconcile import sparkdefaults
from rillet.reconcile.appobjects import building, pods, sparkconfs
from tests.unit import wordcount_inputs

ENV = wordcount_inputs.ENV
BUCKET = "s3a://rillet/apps/wc"
S3A_MANAGER = "org.apache.spark.internal.io.cloud.AbortableStreamBasedCheckpointFileManager"
KEY_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
_context = wordcount_inputs.context
_objects = wordcount_inputs.objects


def _driver_env(objects: building.AppObjects) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = objects.stateful_set["spec"]["template"]["spec"]["containers"][0][
        "env"
    ]
    return env


def _executor_template(objects: building.AppObjects) -> dict[str, Any]:
    template: dict[str, Any] = yaml.safe_load(
        objects.config_map["data"]["executor-pod-template.yaml"]
    )
    return template


def _executor_env(objects: building.AppObjects) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = _executor_template(objects)["spec"]["containers"][0].get("env", [])
    return env


def _key_env(env: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in env if item["name"] in KEY_ENV}


def test_the_key_pair_reaches_driver_and_executors_as_secret_references() -> None:
    secret = {"name": "store", "secretAccessKeyKey": "secret"}
    objects = _objects(checkpoint={"location": BUCKET, "secretRef": secret})

    for env in (_driver_env(objects), _executor_env(objects)):
        assert _key_env(env) == {
            "AWS_ACCESS_KEY_ID": {
                "name": "AWS_ACCESS_KEY_ID",
                "valueFrom": {"secretKeyRef": {"name": "store", "key": "AWS_ACCESS_KEY_ID"}},
            },
            "AWS_SECRET_ACCESS_KEY": {
                "name": "AWS_SECRET_ACCESS_KEY",
                "valueFrom": {"secretKeyRef": {"name": "store", "key": "secret"}},
            },
        }
    # Keys in the conf would be values in the ConfigMap: S3A reads the environment instead.
    rendered = json.dumps(objects.config_map) + json.dumps(objects.spark_conf)
    assert "fs.s3a.access.key" not in rendered
    assert "fs.s3a.secret.key" not in rendered


def test_workload_identity_gets_no_key_variables() -> None:
    objects = _objects(checkpoint={"location": BUCKET})

    assert _key_env(_driver_env(objects)) == {}
    assert _key_env(_executor_env(objects)) == {}


@pytest.mark.parametrize(
    ("endpoint", "tls"),
    [("http://seaweedfs.store:8333", "false"), ("https://minio.example.com", "true")],
)
def test_an_endpoint_is_used_by_path_with_tls_as_its_scheme(endpoint: str, tls: str) -> None:
    conf = sparkconfs.build_spark_conf(
        _context(checkpoint={"location": BUCKET, "endpoint": endpoint})
    )

    assert conf["spark.sql.streaming.checkpointFileManagerClass"] == S3A_MANAGER
    assert conf["spark.hadoop.fs.s3a.endpoint"] == endpoint
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == tls


def test_aws_s3_gets_the_s3a_manager_and_no_endpoint() -> None:
    conf = sparkconfs.build_spark_conf(_context(checkpoint={"location": BUCKET}))

    assert conf["spark.sql.streaming.checkpointFileManagerClass"] == S3A_MANAGER
    assert not any(key.startswith("spark.hadoop.fs.s3a.") for key in conf)


@pytest.mark.parametrize("checkpoint", [None, {"location": "gs://b/wc"}, {"location": "wc/v2"}])
def test_other_checkpoints_keep_the_default_manager(checkpoint: dict[str, str] | None) -> None:
    conf = sparkconfs.build_spark_conf(
        _context(**({"checkpoint": checkpoint} if checkpoint else {}))
    )

    manager = conf["spark.sql.streaming.checkpointFileManagerClass"]
    assert manager == sparkdefaults.CHECKPOINT_FILE_MANAGER
    assert not any("s3a" in key for key in conf)


def test_the_apps_spark_conf_wins_over_the_s3a_settings() -> None:
    own = {
        "spark.sql.streaming.checkpointFileManagerClass": "my.Manager",
        "spark.hadoop.fs.s3a.path.style.access": "false",
        "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
    }
    checkpoint = {"location": BUCKET, "endpoint": "https://s3.example.com"}
    conf = sparkconfs.build_spark_conf(_context(checkpoint=checkpoint, sparkConf=own))

    assert conf.items() >= own.items()
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "https://s3.example.com"


def test_executors_of_a_remote_checkpoint_spread_over_nodes() -> None:
    template = pods.build_executor_pod_template(_context(checkpoint={"location": BUCKET}))

    assert template["spec"]["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {
                "matchLabels": {"rillet.io/app": "wordcount", "rillet.io/role": "executor"}
            },
        }
    ]
    assert "affinity" not in template["spec"]
    # The executors match their own constraint's selector.
    labels = template["metadata"]["labels"]
    selector = template["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"]
    assert labels.items() >= selector.items()


def test_executors_of_a_checkpoint_volume_stay_beside_the_driver_unspread() -> None:
    template = pods.build_executor_pod_template(_context())

    assert "topologySpreadConstraints" not in template["spec"]
    assert "podAffinity" in template["spec"]["affinity"]


def test_the_driver_of_a_remote_checkpoint_claims_no_volume() -> None:
    objects = _objects(checkpoint={"location": BUCKET, "secretRef": {"name": "store"}})

    assert "volumeClaimTemplates" not in objects.stateful_set["spec"]
    volumes = objects.stateful_set["spec"]["template"]["spec"].get("volumes", [])
    assert not any("persistentVolumeClaim" in volume for volume in volumes)
