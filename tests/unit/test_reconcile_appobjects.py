"""Building the Kubernetes objects of an App (pure); its executors and Spark conf are
test_reconcile_executor_conf.py's, what rolls its driver test_reconcile_driver_rollouts.py's.

Test plan:
- every object: its name, the App's namespace, the four labels, the App as controller owner;
- RBAC: the driver rules grant executor pods, Services, ConfigMaps and claims, nothing else,
  and the chart's driver ClusterRole holds exactly them; no Role is made, the RoleBinding binds
  that ClusterRole to the ServiceAccount, and an older release's Role and RoleBinding go;
- ConfigMap: the run spec (checkpoint where the driver keeps it), the Spark conf, the executor
  pod template, each parseable;
- Service: headless, selecting the driver pod, the three named ports;
- StatefulSet: one replica (0 when suspended), Parallel, restricted security, the drive command,
  env, resources, mounts, readiness; a checkpoint claim unless the checkpoint is a URL;
- checkpoint locations: URLs kept, paths put on the volume and kept on it;
- credentials never reach the ConfigMap; an App without uid is refused; names fit
  Kubernetes' limits at the longest App name.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rillet.api.v1alpha1 import apps
from rillet.driverapi import runspecs
from rillet.reconcile import naming
from rillet.reconcile.appobjects import (
    building,
    contexts,
    metadata,
    pods,
    rbac,
)
from tests.unit import wordcount_inputs

ENV = wordcount_inputs.ENV
UID = wordcount_inputs.UID
LABELS = wordcount_inputs.LABELS
CHART = Path(__file__).resolve().parents[2] / "charts" / "rillet"
_objects = wordcount_inputs.objects
_context = wordcount_inputs.context
_inputs = wordcount_inputs.inputs
_pod = wordcount_inputs.driver_pod
_container = wordcount_inputs.driver_container


def test_every_object_is_named_labelled_and_owned_by_the_app() -> None:
    objects = _objects()

    assert [(o["kind"], o["metadata"]["name"]) for o in objects.in_apply_order()] == [
        ("ServiceAccount", "wordcount-driver"),
        ("RoleBinding", "wordcount-driver-rights"),
        ("ConfigMap", "wordcount-run"),
        ("Service", "wordcount-driver"),
        ("NetworkPolicy", "wordcount-spark"),
        ("StatefulSet", "wordcount-driver"),
    ]
    for item in objects.in_apply_order():
        assert item["metadata"]["namespace"] == "team"
        assert item["metadata"]["labels"] == LABELS
        assert item["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "rillet.io/v1alpha1",
                "kind": "App",
                "name": "wordcount",
                "uid": UID,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]


def test_the_driver_rules_are_what_spark_and_the_runtime_need_and_nothing_else() -> None:
    grants = {
        (group, resource, tuple(rule.get("resourceNames", ())), verb)
        for rule in rbac.driver_rules()
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    manage = {"get", "list", "watch", "create", "delete", "deletecollection"}
    expected = {
        *(("", "pods", (), verb) for verb in manage | {"patch"}),
        ("", "pods/log", (), "get"),
        *(
            ("", r, (), v)
            for r in ("services", "configmaps", "persistentvolumeclaims")
            for v in manage
        ),
    }
    assert grants == expected


def test_the_charts_driver_cluster_role_holds_the_driver_rules() -> None:
    """The chart's template is what the cluster grants; the rules here say what it must be."""
    template = (CHART / "templates" / "driverrole.yaml").read_text(encoding="utf-8")
    assert "kind: ClusterRole\n" in template
    assert yaml.safe_load(template[template.index("\nrules:") :])["rules"] == rbac.driver_rules()


def test_no_role_is_made_and_the_older_releases_are_deleted() -> None:
    objects = _objects()

    kinds = [obj["kind"] for obj in objects.in_apply_order()]
    assert "Role" not in kinds
    assert [(o["kind"], o["metadata"]["name"]) for o in objects.legacy] == [
        ("RoleBinding", "wordcount-driver"),
        ("Role", "wordcount-driver"),
    ]
    assert all(o["metadata"]["ownerReferences"][0]["uid"] == UID for o in objects.legacy)


def test_role_binding_binds_the_driver_cluster_role_to_the_service_account() -> None:
    binding = _objects().role_binding

    assert binding["metadata"]["name"] == "wordcount-driver-rights"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": contexts.DEFAULT_DRIVER_CLUSTER_ROLE,
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "wordcount-driver", "namespace": "team"}
    ]


def test_config_map_holds_run_spec_spark_conf_and_executor_template() -> None:
    objects = _objects()
    data = objects.config_map["data"]

    run_spec = runspecs.RunSpec.model_validate_json(data["run-spec.json"])
    assert run_spec.checkpoint_location == "/var/lib/rillet/checkpoints/wordcount"
    assert run_spec.inputs[0].topic == "sentences"
    assert json.loads(data["spark-conf.json"]) == objects.spark_conf
    template = yaml.safe_load(data["executor-pod-template.yaml"])
    assert template == pods.build_executor_pod_template(_context())


def test_the_run_spec_file_leaves_defaults_out_and_reads_back_whole() -> None:
    """An older runtime image (an App pins its image) refuses keys it does not know; a field
    at its default is not written, so adding one breaks no App that leaves it unset."""
    context = _context()
    written = json.loads(_objects().config_map["data"]["run-spec.json"])

    assert "checkpoint_on_loss" not in written
    assert not {"event_time", "max_offsets_per_trigger"} & set(written["inputs"][0])
    assert runspecs.RunSpec.model_validate(written) == context.run_spec


def test_service_is_headless_and_selects_the_driver_pod() -> None:
    objects = _objects()
    spec = objects.service["spec"]

    assert spec["clusterIP"] == "None"
    assert spec["selector"] == {"rillet.io/app": "wordcount", "rillet.io/role": "driver"}
    assert [(p["name"], p["port"]) for p in spec["ports"]] == [
        ("driver-rpc", 7078),
        ("blockmanager", 7079),
        ("metrics", 9090),
    ]
    pod_labels = _pod(objects)["metadata"]["labels"]
    assert spec["selector"].items() <= pod_labels.items()


def test_stateful_set_runs_one_driver_pod_by_its_service() -> None:
    spec = _objects().stateful_set["spec"]

    assert spec["replicas"] == 1
    assert spec["serviceName"] == "wordcount-driver"
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["selector"] == {
        "matchLabels": {"rillet.io/app": "wordcount", "rillet.io/role": "driver"}
    }
    assert spec["template"]["metadata"]["labels"] == {**LABELS, "rillet.io/role": "driver"}


def test_suspend_scales_the_driver_to_zero() -> None:
    assert _objects(suspend=True).stateful_set["spec"]["replicas"] == 0


def test_driver_pod_meets_the_restricted_pod_security_standard() -> None:
    objects = _objects()
    pod_spec = _pod(objects)["spec"]

    assert pod_spec["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "fsGroup": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert _container(objects)["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert pod_spec["serviceAccountName"] == "wordcount-driver"
    assert pod_spec["automountServiceAccountToken"] is True
    assert pod_spec["terminationGracePeriodSeconds"] == 60


def test_driver_container_runs_rillet_drive_with_its_env() -> None:
    container = _container(_objects())

    assert container["image"] == "rillet/spark-runtime:0.1.0"
    assert container["imagePullPolicy"] == "IfNotPresent"
    # Under tini: PID 1 itself would drop a SIGTERM that comes before the driver handles it.
    assert container["command"] == [
        "/usr/bin/tini",
        "--",
        "rillet",
        "drive",
        "/etc/rillet/run-spec.json",
    ]
    assert container["args"] == [
        "--executor-pod-template",
        "/etc/rillet/executor-pod-template.yaml",
    ]
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env == {
        "POD_NAME": {"fieldRef": {"fieldPath": "metadata.name"}},
        "POD_IP": {"fieldRef": {"fieldPath": "status.podIP"}},
        "POD_NAMESPACE": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        "RILLET_APP_NAME": "wordcount",
        "RILLET_KAFKA_BOOTSTRAP": "kafka:9092",
        "RILLET_SPARK_CONF_JSON": {
            "configMapKeyRef": {"name": "wordcount-run", "key": "spark-conf.json"}
        },
    }
    assert container["readinessProbe"]["tcpSocket"] == {"port": "metrics"}


def test_driver_resources_come_from_spec_driver() -> None:
    container = _container(_objects(driver={"cpu": "500m", "memory": "2Gi"}))

    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "2Gi"},
        "limits": {"memory": "2Gi"},
    }


def test_driver_mounts_config_checkpoint_and_tmp() -> None:
    objects = _objects()

    mounts = {m["name"]: m["mountPath"] for m in _container(objects)["volumeMounts"]}
    assert mounts == {
        "config": "/etc/rillet",
        "checkpoint": "/var/lib/rillet/checkpoints",
        "tmp": "/tmp",
        "spark-auth": "/var/run/secrets/rillet/spark-auth",
    }
    volumes = {v["name"]: v for v in _pod(objects)["spec"]["volumes"]}
    assert volumes == {
        "config": {"name": "config", "configMap": {"name": "wordcount-run"}},
        "tmp": {"name": "tmp", "emptyDir": {}},
        "spark-auth": {
            "name": "spark-auth",
            "secret": {"secretName": "wordcount-spark-auth", "defaultMode": 0o440},
        },
    }
    claims = objects.stateful_set["spec"]["volumeClaimTemplates"]
    assert claims == [
        {
            "metadata": {"name": "checkpoint", "labels": LABELS},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    ]


def test_checkpoint_claim_takes_size_and_storage_class_from_the_environment() -> None:
    env = contexts.AppEnvironment(
        kafka_bootstrap="kafka:9092", storage_class="fast", checkpoint_size="20Gi"
    )

    claims = _objects(env).stateful_set["spec"]["volumeClaimTemplates"]
    spec = claims[0]["spec"]

    assert (spec["storageClassName"], spec["resources"]["requests"]["storage"]) == ("fast", "20Gi")


@pytest.mark.parametrize(
    "url", ["s3a://bucket/apps/wc", "hdfs://nn:8020/ck", "gs://b/ck", "abfs://c@a.dfs/ck"]
)
def test_a_checkpoint_url_needs_no_volume(url: str) -> None:
    objects = _objects(checkpoint={"location": url})

    assert "volumeClaimTemplates" not in objects.stateful_set["spec"]
    assert "checkpoint" not in {m["name"] for m in _container(objects)["volumeMounts"]}
    run_spec = runspecs.RunSpec.model_validate_json(objects.config_map["data"]["run-spec.json"])
    assert run_spec.checkpoint_location == url


@pytest.mark.parametrize(
    ("location", "resolved"),
    [
        (None, "/var/lib/rillet/checkpoints/wordcount"),
        ("s3a://bucket/apps/wc", "s3a://bucket/apps/wc"),
        ("clicks/v2", "/var/lib/rillet/checkpoints/clicks/v2"),
        ("/data/clicks/", "/var/lib/rillet/checkpoints/data/clicks"),
        ("/var/lib/rillet/checkpoints/clicks", "/var/lib/rillet/checkpoints/clicks"),
        ("/var/lib/rillet/checkpoints", "/var/lib/rillet/checkpoints"),
        ("../../etc", "/var/lib/rillet/checkpoints/etc"),
        ("/", "/var/lib/rillet/checkpoints"),
        ("file:///ck/wc", "/var/lib/rillet/checkpoints/ck/wc"),
    ],
)
def test_checkpoint_location(location: str | None, resolved: str) -> None:
    spec = {} if location is None else {"checkpoint": {"location": location}}
    app, _ = _inputs(**spec)

    assert contexts.checkpoint_location(app) == resolved


def test_kafka_credentials_never_reach_the_config_map() -> None:
    app, run_spec = _inputs()
    secret = run_spec.model_copy(update={"kafka_config": {"sasl.jaas.config": "... password=x"}})

    with pytest.raises(ValueError, match=r"sasl\.jaas\.config"):
        building.build_app_objects(app, secret, ENV)


def test_an_app_without_uid_is_refused() -> None:
    app, run_spec = _inputs()
    app = app.model_copy(update={"metadata": app.metadata.model_copy(update={"uid": None})})

    with pytest.raises(ValueError, match="uid"):
        building.build_app_objects(app, run_spec, ENV)


def test_names_fit_kubernetes_limits_at_the_longest_app_name() -> None:
    app = "a" * apps.APP_NAME_MAX_LENGTH

    # controller-revision-hash: "<statefulset>-<up to 10 characters>", a 63-character label.
    assert len(naming.app_driver_name(app)) + 1 + 10 <= 63
    assert len(naming.app_driver_pod_name(app)) <= 63
    assert len(naming.app_executor_pod_prefix(app) + "-exec-10000") <= 63
    assert len(naming.app_checkpoint_claim_name(app)) <= 253
    assert naming.app_checkpoint_claim_name("wc") == "checkpoint-wc-driver-0"


def test_label_selectors_of_driver_and_executors() -> None:
    assert metadata.label_selector("wc", "executor") == "rillet.io/app=wc,rillet.io/role=executor"
    assert metadata.label_selector("wc", "driver") == "rillet.io/app=wc,rillet.io/role=driver"
