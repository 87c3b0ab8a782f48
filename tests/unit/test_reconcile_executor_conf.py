"""An App's executors and Spark conf, as its objects carry them (pure).

Test plan:
- the executor pod template: restricted, the executor entrypoint, the driver's checkpoint
  claim shared on its node (none for a remote checkpoint), CPU from the executor cores;
- Spark conf: client mode on Kubernetes, fixed ports, executor shape (heap + overhead = pod
  memory; the least memory the API allows gives a heap Spark starts with), the App's sparkConf
  wins over defaults, Rillet's keys win over everything; the executors a driver starts with
  are minExecutors within the cap known (one when none is);
- fragments merge maps and lists and refuse contradictions.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest

from rillet.api.v1alpha1 import apps, quantities
from rillet.reconcile import parallelisms, sparkdefaults
from rillet.reconcile.appobjects import (
    contexts,
    fragments,
    pods,
    sparkconfs,
)
from tests.unit import wordcount_inputs

ENV = wordcount_inputs.ENV
LABELS = wordcount_inputs.LABELS
_context = wordcount_inputs.context
_inputs = wordcount_inputs.inputs


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
    assert quantities.memory_mib(quantity) == mib
    assert sparkconfs.split_memory(quantity, sparkconfs.EXECUTOR_HEAP_SHARE) == (heap, overhead)


@pytest.mark.parametrize(
    ("minimum", "share"),
    [
        (quantities.MIN_EXECUTOR_MEMORY, sparkconfs.EXECUTOR_HEAP_SHARE),
        (quantities.MIN_DRIVER_MEMORY, sparkconfs.DRIVER_HEAP_SHARE),
    ],
)
def test_the_least_memory_an_app_may_ask_for_gives_a_heap_spark_starts_with(
    minimum: str, share: Decimal
) -> None:
    # Spark's floor is 450 MiB as Runtime.maxMemory reports it, which under ParallelGC is
    # 450 MiB for -Xmx505m (measured with `java -XX:+UseParallelGC -Xmx505m`).
    assert sparkdefaults.GC_OPTION == "-XX:+UseParallelGC"
    heap, _ = sparkconfs.split_memory(minimum, share)
    assert heap >= 505


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
