"""Building the Kubernetes objects of an App (pure).

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
- Spark conf: client mode on Kubernetes, fixed ports, executor shape (heap + overhead = pod
  memory), the App's sparkConf wins over defaults, Rillet's keys win over everything; the
  executors a driver starts with are minExecutors within the cap known (one when none is);
- spec hash: a spec change rolls the driver; scaling, partitions and suspend do not touch the
  pod template at all;
- fragments merge maps and lists and refuse contradictions; credentials never reach the
  ConfigMap; names fit Kubernetes' limits at the longest App name;
- replacing the StatefulSet is needed only for changes of its immutable fields.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rillet.api.v1alpha1 import apps
from rillet.driverapi import runspecs
from rillet.reconcile import naming, parallelisms, sparkdefaults
from rillet.reconcile.appobjects import (
    building,
    contexts,
    drivers,
    fragments,
    metadata,
    pods,
    rbac,
    sparkconfs,
)
from tests.unit import wordcount_inputs

ENV = contexts.AppEnvironment(kafka_bootstrap="kafka:9092")
UID = wordcount_inputs.UID
CHART = Path(__file__).resolve().parents[2] / "charts" / "rillet"
_inputs = wordcount_inputs.inputs


def _objects(env: contexts.AppEnvironment = ENV, **spec: Any) -> building.AppObjects:
    return building.build_app_objects(*_inputs(**spec), env)


def _context(**spec: Any) -> contexts.AppContext:
    return contexts.build_context(*_inputs(**spec), ENV)


def _pod(objects: building.AppObjects) -> dict[str, Any]:
    template: dict[str, Any] = objects.stateful_set["spec"]["template"]
    return template


def _container(objects: building.AppObjects) -> dict[str, Any]:
    container: dict[str, Any] = _pod(objects)["spec"]["containers"][0]
    return container


LABELS = {
    "app.kubernetes.io/name": "rillet-app",
    "app.kubernetes.io/instance": "wordcount",
    "app.kubernetes.io/managed-by": "rillet",
    "rillet.io/app": "wordcount",
}


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


def test_executor_pod_template_is_restricted_and_runs_the_executor_entrypoint() -> None:
    template = pods.build_executor_pod_template(_context(executor={"memory": "4Gi"}))

    assert template["metadata"]["labels"] == {**LABELS, "rillet.io/role": "executor"}
    assert template["spec"]["securityContext"] == pods.pod_security_context()
    assert template["spec"]["automountServiceAccountToken"] is False
    (container,) = template["spec"]["containers"]
    assert container["name"] == "spark-executor"
    assert container["command"] == ["/opt/rillet/bin/spark-executor"]
    assert container["securityContext"] == pods.container_security_context()
    assert container["resources"] == {
        "requests": {"cpu": "1", "memory": "4Gi"},
        "limits": {"memory": "4Gi"},
    }
    assert container["volumeMounts"] == [
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "checkpoint", "mountPath": "/var/lib/rillet/checkpoints"},
    ]


def test_executors_share_the_drivers_checkpoint_claim_on_its_node() -> None:
    # Executors write the state stores under the checkpoint: same claim, same path as the driver.
    template = pods.build_executor_pod_template(_context())

    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    assert volumes["checkpoint"]["persistentVolumeClaim"] == {
        "claimName": "checkpoint-wordcount-driver-0"
    }
    (term,) = template["spec"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["labelSelector"]["matchLabels"] == {
        "rillet.io/app": "wordcount",
        "rillet.io/role": "driver",
    }
    assert term["topologyKey"] == "kubernetes.io/hostname"


def test_executors_of_a_remote_checkpoint_go_anywhere() -> None:
    template = pods.build_executor_pod_template(_context(checkpoint={"location": "s3a://b/wc"}))

    assert "affinity" not in template["spec"]
    assert [v["name"] for v in template["spec"]["volumes"]] == ["tmp"]
    (container,) = template["spec"]["containers"]
    assert [m["name"] for m in container["volumeMounts"]] == ["tmp"]


@pytest.mark.parametrize(
    ("executor", "cores", "cpu"),
    [({}, 1, "1"), ({}, 3, "3"), ({"cpu": "1500m"}, 2, "1500m"), ({"cpu": 2}, 4, "2")],
)
def test_executor_cpu_defaults_to_executor_cores(
    executor: dict[str, Any], cores: int, cpu: str
) -> None:
    context = _context(executor=executor, scaling={"executorCores": cores})
    conf = sparkconfs.build_spark_conf(context)

    assert conf["spark.kubernetes.executor.request.cores"] == cpu
    assert conf["spark.executor.cores"] == str(cores)
    template = pods.build_executor_pod_template(context)
    assert template["spec"]["containers"][0]["resources"]["requests"]["cpu"] == cpu


def test_spark_conf_runs_client_mode_on_kubernetes() -> None:
    conf = sparkconfs.build_driver_spark_conf(*_inputs(), ENV)

    assert {key: conf[key] for key in EXPECTED_CONF} == EXPECTED_CONF
    assert "spark.kubernetes.driver.pod.name" not in conf
    assert "spark.driver.host" not in conf
    # runresolving's settings are kept.
    assert conf["spark.sql.streaming.stateStore.providerClass"] == sparkdefaults.ROCKSDB_PROVIDER
    assert conf["spark.sql.shuffle.partitions"] == "3"


EXPECTED_CONF = {
    "spark.master": "k8s://https://kubernetes.default.svc:443",
    "spark.submit.deployMode": "client",
    "spark.kubernetes.namespace": "team",
    "spark.kubernetes.container.image": "rillet/spark-runtime:0.1.0",
    "spark.kubernetes.container.image.pullPolicy": "IfNotPresent",
    "spark.kubernetes.executor.podTemplateFile": "/etc/rillet/executor-pod-template.yaml",
    "spark.kubernetes.executor.podTemplateContainerName": "spark-executor",
    "spark.kubernetes.executor.podNamePrefix": "wordcount",
    "spark.kubernetes.authenticate.caCertFile": (
        "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
    ),
    "spark.kubernetes.authenticate.oauthTokenFile": (
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    ),
    "spark.kubernetes.authenticate.driver.serviceAccountName": "wordcount-driver",
    "spark.driver.port": "7078",
    "spark.blockManager.port": "7079",
    "spark.driver.bindAddress": "0.0.0.0",
    "spark.driver.memory": "512m",
    "spark.executor.cores": "1",
    "spark.executor.instances": "1",
    "spark.kubernetes.executor.request.cores": "1",
    "spark.executor.memory": "1536m",
    "spark.executor.memoryOverhead": "512m",
    "spark.dynamicAllocation.enabled": "false",
    "spark.kubernetes.allocation.batch.size": "10",
    "spark.kubernetes.executor.deleteOnTermination": "true",
}


@pytest.mark.parametrize(
    ("quantity", "mib", "heap", "overhead"),
    [
        ("2Gi", 2048, 1536, 512),
        ("1Gi", 1024, 768, 256),
        ("1500Mi", 1500, 1125, 375),
        ("1.5Gi", 1536, 1152, 384),
        ("2G", 1907, 1430, 477),
        (3 * 2**30, 3072, 2304, 768),
        ("4096Ki", 4, 3, 1),
    ],
)
def test_executor_memory_splits_into_heap_and_overhead(
    quantity: int | str, mib: int, heap: int, overhead: int
) -> None:
    assert sparkconfs.memory_mib(quantity) == mib
    assert sparkconfs.split_memory(quantity, sparkconfs.EXECUTOR_HEAP_SHARE) == (heap, overhead)


def test_min_executors_is_the_initial_count_within_the_declared_partitions() -> None:
    # The example's input Topic declares 3 partitions.
    conf = sparkconfs.build_spark_conf(_context(scaling={"minExecutors": 3, "maxExecutors": 5}))
    capped = sparkconfs.build_spark_conf(_context(scaling={"minExecutors": 5, "maxExecutors": 8}))

    assert conf["spark.executor.instances"] == "3"
    assert capped["spark.executor.instances"] == "3"


@pytest.mark.parametrize(
    ("inputs", "state", "instances"),
    [(2, None, "2"), (2, 4, "4"), (6, None, "5"), (None, None, "3"), (None, 8, "5")],
)
def test_a_driver_starts_its_executors_within_the_known_cap(
    inputs: int | None, state: int | None, instances: str
) -> None:
    # Input partitions not known from Kafka: the example Topic's declared 3 stand in.
    app, run_spec = _inputs(scaling={"minExecutors": 5, "maxExecutors": 8})
    known = parallelisms.Parallelism(input_partitions=inputs, state_partitions=state)
    context = contexts.build_context(app, run_spec, ENV, parallelism=known)

    assert sparkconfs.build_spark_conf(context)["spark.executor.instances"] == instances


def test_a_driver_starts_one_executor_when_no_input_declares_its_partitions() -> None:
    app, run_spec = _inputs(scaling={"minExecutors": 3, "maxExecutors": 5})
    unknown = run_spec.model_copy(
        update={"inputs": tuple(i.model_copy(update={"partitions": None}) for i in run_spec.inputs)}
    )
    conf = sparkconfs.build_spark_conf(contexts.build_context(app, unknown, ENV))

    assert conf["spark.executor.instances"] == "1"


def test_app_spark_conf_overrides_defaults_but_not_rillet_keys() -> None:
    user = {
        "spark.sql.shuffle.partitions": "12",
        "spark.kubernetes.allocation.batch.size": "2",
        "spark.sql.adaptive.enabled": "false",
    }
    context = _context(sparkConf=user)

    assert sparkconfs.build_spark_conf(context).items() >= user.items()
    # A run spec that bypassed the API's checks still cannot move Rillet's settings.
    forced = context.run_spec.model_copy(update={"spark_conf": {"spark.driver.port": "1"}})
    conf = sparkconfs.build_spark_conf(
        contexts.AppContext(app=context.app, run_spec=forced, env=ENV)
    )
    assert conf["spark.driver.port"] == "7078"


def test_every_key_rillet_sets_over_the_apps_conf_is_reserved_by_the_api() -> None:
    context = _context()
    owned = {key for option in sparkconfs.OWNED_OPTIONS for key in option(context)}

    assert all(apps.is_reserved_spark_conf(key) for key in owned - {"spark.app.name"})


def _template_hash(objects: building.AppObjects) -> str:
    annotation: str = _pod(objects)["metadata"]["annotations"]["rillet.io/spec-hash"]
    return annotation


def test_spec_hash_is_on_the_driver_pod_and_stable() -> None:
    first, second = _objects(), _objects()

    assert _template_hash(first) == first.spec_hash == second.spec_hash
    assert len(first.spec_hash) == 64


@pytest.mark.parametrize(
    "change",
    [
        {"image": "rillet/spark-runtime:0.2.0"},
        {"sparkConf": {"spark.sql.adaptive.enabled": "false"}},
        {"sparkConf": {"spark.sql.shuffle.partitions": "6"}},
        {"pipeline": {"sql": "SELECT value AS word, 1 AS count FROM sentences"}},
        {"executor": {"memory": "4Gi"}},
        {"executor": {"cpu": "2"}},
        {"driver": {"memory": "2Gi"}},
        {"scaling": {"executorCores": 2}},
        {"checkpoint": {"location": "s3a://bucket/wc"}},
        {"checkpoint": {"onLoss": "Recompute"}},
    ],
)
def test_a_spec_change_changes_the_hash(change: dict[str, Any]) -> None:
    assert _objects(**change).spec_hash != _objects().spec_hash


@pytest.mark.parametrize(
    ("key", "default", "own_value"),
    [("spark.locality.wait", "0s", "3s"), ("spark.sql.streaming.pollingDelay", "250ms", "10ms")],
)
def test_restart_free_defaults_are_not_hashed_but_an_apps_own_value_is(
    key: str, default: str, own_value: str
) -> None:
    # A release adding such a default restarts no driver; an App's own value does.
    conf = sparkconfs.build_spark_conf(_context())
    assert conf[key] == default
    assert key not in sparkconfs.hashed(conf)
    own = _objects(sparkConf={key: own_value})
    assert own.spec_hash != _objects().spec_hash


def test_run_spec_fields_at_their_defaults_are_not_hashed() -> None:
    """So an operator upgrade that adds a field (as checkpoint.onLoss and eventTime were
    added) restarts no driver whose App leaves it unset."""
    hashed = drivers.hashed_run_spec(_context().run_spec)

    assert "checkpoint_on_loss" not in hashed
    assert not {"event_time", "max_offsets_per_trigger"} & set(hashed["inputs"][0])
    assert _objects(checkpoint={"onLoss": "Stall"}).spec_hash == _objects().spec_hash


@pytest.mark.parametrize(
    "change",
    [
        {"scaling": {"minExecutors": 2, "maxExecutors": 6}},
        {"scaling": {"lagTarget": 10, "stabilizationWindowSeconds": 5}},
        {"suspend": True},
    ],
)
def test_scaling_changes_leave_the_pod_template_alone(change: dict[str, Any]) -> None:
    before, after = _objects(), _objects(**change)

    assert after.stateful_set["spec"]["template"] == before.stateful_set["spec"]["template"]


def test_more_partitions_leave_the_pod_template_alone() -> None:
    app, run_spec = _inputs()
    grown = run_spec.model_copy(
        update={
            "inputs": tuple(i.model_copy(update={"partitions": 12}) for i in run_spec.inputs),
            "shuffle_partitions": 12,
        }
    )

    before = building.build_app_objects(app, run_spec, ENV)
    after = building.build_app_objects(app, grown, ENV)

    assert after.stateful_set == before.stateful_set
    assert after.config_map != before.config_map


@pytest.mark.parametrize(
    ("fragments_in", "merged"),
    [
        (({"a": 1}, {"b": 2}), {"a": 1, "b": 2}),
        (({"s": {"x": 1}}, {"s": {"y": 2}}), {"s": {"x": 1, "y": 2}}),
        (({"l": [1]}, {"l": [2, 3]}), {"l": [1, 2, 3]}),
        (({"a": 1}, {"a": 1}), {"a": 1}),
        (({"a": 1}, {}), {"a": 1}),
    ],
)
def test_fragments_merge_maps_and_lists(
    fragments_in: tuple[dict[str, Any], ...], merged: dict[str, Any]
) -> None:
    assert fragments.merge(*fragments_in) == merged


def test_fragments_refuse_two_values_for_one_field() -> None:
    with pytest.raises(ValueError, match=r"\.spec\.replicas"):
        fragments.merge({"spec": {"replicas": 1}}, {"spec": {"replicas": 0}})


def test_merging_does_not_change_the_fragments() -> None:
    first = {"spec": {"volumes": [{"name": "a"}]}}
    kept = copy.deepcopy(first)

    fragments.merge(first, {"spec": {"volumes": [{"name": "b"}]}})

    assert first == kept


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


def _as_stored(stateful_set: dict[str, Any]) -> dict[str, Any]:
    """The StatefulSet as the apiserver returns it: defaults filled in."""
    stored = copy.deepcopy(stateful_set)
    for claim in stored["spec"].get("volumeClaimTemplates", ()):
        claim |= {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "status": {"phase": "Pending"},
        }
        claim["spec"]["volumeMode"] = "Filesystem"
    stored["spec"]["revisionHistoryLimit"] = 10
    return stored


def test_an_unchanged_stateful_set_needs_no_replacement() -> None:
    desired = _objects().stateful_set

    assert drivers.replacement_reasons(_as_stored(desired), desired) == []
    assert (
        drivers.replacement_reasons(_as_stored(desired), _objects(suspend=True).stateful_set) == []
    )


def test_a_new_claim_size_or_a_remote_checkpoint_needs_a_replacement() -> None:
    stored = _as_stored(_objects().stateful_set)
    bigger = contexts.AppEnvironment(kafka_bootstrap="kafka:9092", checkpoint_size="5Gi")

    assert drivers.replacement_reasons(stored, _objects(bigger).stateful_set) == [
        "volumeClaimTemplates"
    ]
    remote = _objects(checkpoint={"location": "s3a://b/wc"}).stateful_set
    assert drivers.replacement_reasons(stored, remote) == ["volumeClaimTemplates"]
