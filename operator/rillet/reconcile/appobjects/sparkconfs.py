"""The Spark conf of an App's driver: Kubernetes client mode, fixed ports, executor shape.

Built by small option functions, each adding the settings of one concern, as the Spark operator
builds spark-submit arguments. The settings Rillet owns (which api.v1alpha1.appsparkconf refuses
in an App's sparkConf) come last and win; before them `sparkdefaults.build_spark_conf` (RocksDB
state, the App's sparkConf) and before that defaults the App's sparkConf may change.

The driver pod's name and IP (spark.kubernetes.driver.pod.name, spark.driver.host) are known
only inside the pod: the runtime adds them from POD_NAME and POD_IP.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Final

from rillet.api.v1alpha1 import apps, quantities
from rillet.driverapi import runspecs, wiring
from rillet.reconcile import naming, sparkdefaults
from rillet.reconcile.appobjects import contexts, sparkauth

# The container of the executor pod template that Spark fills in.
EXECUTOR_CONTAINER: Final = "spark-executor"

SparkConf = dict[str, str]
SparkOption = Callable[[contexts.AppContext], SparkConf]

# Of an executor pod's memory, the JVM heap (spark.executor.memory) gets this share and
# spark.executor.memoryOverhead the rest (off-heap: RocksDB, Python workers, JVM overhead), so
# the pod Spark requests has exactly spec.executor.memory.
EXECUTOR_HEAP_SHARE: Final = Decimal("0.75")
# The driver pod also runs the Python process of the runtime, beside the JVM.
DRIVER_HEAP_SHARE: Final = Decimal("0.5")

# Settings that change while the App runs, or only follow the partition count: a new value must
# not restart the driver, so they stay out of the spec hash (see drivers.spec_hash).
# spark.sql.shuffle.partitions, when the App sets it, is hashed through the run spec's sparkConf.
LIVE_KEYS: Final = frozenset({"spark.executor.instances", sparkdefaults.SHUFFLE_PARTITIONS})


def split_memory(quantity: int | str, heap_share: Decimal) -> tuple[int, int]:
    """(heap, rest) in MiB of a pod's memory, the heap being `heap_share` of it."""
    total = quantities.memory_mib(quantity)
    heap = int(total * heap_share)
    return heap, total - heap


def executor_cpu(spec: apps.AppSpec) -> str:
    """CPU request of an executor pod: spec.executor.cpu, else one CPU per executor core."""
    cpu = spec.executor.cpu
    return str(cpu) if cpu is not None else str(spec.scaling.executor_cores)


def _client_mode(context: contexts.AppContext) -> SparkConf:
    # The driver runs in its own pod (the StatefulSet's); Spark only creates executors.
    return {
        "spark.master": f"k8s://{context.env.apiserver_url}",
        "spark.submit.deployMode": "client",
        "spark.kubernetes.namespace": context.namespace,
    }


def _image(context: contexts.AppContext) -> SparkConf:
    return {"spark.kubernetes.container.image": context.spec.image}


def _executor_pods(context: contexts.AppContext) -> SparkConf:
    return {
        "spark.kubernetes.executor.podTemplateFile": wiring.EXECUTOR_TEMPLATE_PATH,
        "spark.kubernetes.executor.podTemplateContainerName": EXECUTOR_CONTAINER,
        "spark.kubernetes.executor.podNamePrefix": naming.app_executor_pod_prefix(context.name),
    }


def _authentication(context: contexts.AppContext) -> SparkConf:
    # The driver talks to the apiserver as its ServiceAccount, with the mounted token.
    return {
        "spark.kubernetes.authenticate.caCertFile": f"{wiring.SERVICE_ACCOUNT_DIR}/ca.crt",
        "spark.kubernetes.authenticate.oauthTokenFile": f"{wiring.SERVICE_ACCOUNT_DIR}/token",
        "spark.kubernetes.authenticate.driver.serviceAccountName": naming.app_driver_name(
            context.name
        ),
    }


def _driver_network(context: contexts.AppContext) -> SparkConf:
    # Fixed ports, named in the driver's Service; bound on all interfaces of the pod.
    return {
        "spark.driver.port": str(wiring.DRIVER_RPC_PORT),
        "spark.blockManager.port": str(wiring.BLOCK_MANAGER_PORT),
        "spark.driver.bindAddress": "0.0.0.0",
    }


def _driver_memory(context: contexts.AppContext) -> SparkConf:
    heap, _ = split_memory(context.spec.driver.memory, DRIVER_HEAP_SHARE)
    return {"spark.driver.memory": f"{heap}m"}


def _executor_shape(context: contexts.AppContext) -> SparkConf:
    heap, overhead = split_memory(context.spec.executor.memory, EXECUTOR_HEAP_SHARE)
    return {
        "spark.executor.cores": str(context.spec.scaling.executor_cores),
        "spark.kubernetes.executor.request.cores": executor_cpu(context.spec),
        "spark.executor.memory": f"{heap}m",
        "spark.executor.memoryOverhead": f"{overhead}m",
    }


def _executor_count(context: contexts.AppContext) -> SparkConf:
    # Rillet scales executors itself, from lag: Spark's dynamic allocation scales on pending
    # tasks, and killExecutors (how the runtime scales down) requires it off. Spark starts this
    # many before the runtime reads the App's desired count: the minimum, within the cap.
    return {
        "spark.executor.instances": str(context.starting_executors),
        "spark.dynamicAllocation.enabled": "false",
    }


def _allocation_defaults(context: contexts.AppContext) -> SparkConf:
    # A default the App's sparkConf may change.
    return {"spark.kubernetes.allocation.batch.size": "10"}


def _executor_lifecycle(context: contexts.AppContext) -> SparkConf:
    # The pull policy is the platform's (with IfNotPresent or Never a pod may run an image
    # another tenant pulled onto the node); executors that end are deleted, not left behind.
    return {
        "spark.kubernetes.container.image.pullPolicy": context.env.image_pull_policy,
        "spark.kubernetes.executor.deleteOnTermination": "true",
    }


# Settings Rillet owns, in order; they win over the App's sparkConf.
OWNED_OPTIONS: Final[tuple[SparkOption, ...]] = (
    _client_mode,
    _image,
    _executor_pods,
    _executor_lifecycle,
    _authentication,
    sparkauth.spark_conf,
    _driver_network,
    _driver_memory,
    _executor_shape,
    _executor_count,
)


def build_spark_conf(context: contexts.AppContext) -> SparkConf:
    """The driver's Spark conf: defaults, then the App's run conf, then what Rillet owns."""
    checkpoint = context.spec.checkpoint
    endpoint = checkpoint.endpoint if checkpoint else None
    conf: SparkConf = {
        **_allocation_defaults(context),
        **sparkdefaults.build_spark_conf(context.run_spec, checkpoint_endpoint=endpoint),
    }
    for option in OWNED_OPTIONS:
        conf |= option(context)
    return conf


def build_driver_spark_conf(
    app: apps.App, run_spec: runspecs.RunSpec, env: contexts.AppEnvironment
) -> SparkConf:
    """The Spark conf the driver pod of `app` runs with (as wiring.SPARK_CONF_ENV)."""
    return build_spark_conf(contexts.build_context(app, run_spec, env))


def hashed(conf: Mapping[str, str]) -> dict[str, str]:
    """The conf without the settings whose change must not restart the driver (LIVE_KEYS), nor
    settings at Rillet's restart-free defaults (scheduling, polling): a release that adds one
    restarts no driver (it takes effect at the next start), while an App that sets its own value
    is restarted."""
    return {
        key: value
        for key, value in conf.items()
        if key not in LIVE_KEYS and sparkdefaults.RESTART_FREE_DEFAULTS.get(key) != value
    }
