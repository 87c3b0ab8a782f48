"""Operator start-up and shutdown: kopf settings, the operator-wide loops (topic syncer, resync,
App scaling), the Table nudges, the metrics endpoint."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from typing import Any

import kopf

from rillet.handlers import (
    appaccess,
    appreconciling,
    appregistry,
    appscaling,
    indexes,
    nudging,
    principalsweeping,
    reconciling,
    resyncing,
    supervision,
    tables,
)
from rillet.k8s.applying import AppKube
from rillet.k8s.writing import ObjectWriter
from rillet.kafka.admin import TopicAdmin
from rillet.kafka.claimstore import ClaimStore
from rillet.kafka.lag import LagReader
from rillet.kafka.syncing import TopicSyncer
from rillet.reconcile import appresolving, kafkaaccess
from rillet.settings import (
    AppSettings,
    KafkaSettings,
    OperatorSettings,
    SchemaRegistrySettings,
)

FINALIZER = "rillet.io/finalizer"
GC_YOUNG_THRESHOLD = 10_000
# Its uid is the usual id of a Kubernetes cluster (it is never deleted nor made again).
CLUSTER_ID_NAMESPACE = "kube-system"
# Users' annotations under kopf's storage prefix that ask for work (see ProgressStorage).
USER_ANNOTATIONS = frozenset({kafkaaccess.ROTATE_ANNOTATION, *reconciling.USER_ANNOTATIONS})


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **kwargs: Any) -> None:
    # As `rillet operator run` resolved them (its --namespace wins); the environment otherwise.
    operator = memo.get("operator") or OperatorSettings()
    kafka = KafkaSettings()
    configure(settings, operator)
    tune_garbage_collection()
    syncer = topic_syncer(operator, kafka)
    writer = ObjectWriter(instance=operator.pod_name)
    memo.operator = operator
    memo.syncer = syncer
    memo.nudger = nudging.Nudger(
        plural=tables.PLURAL,
        index=kwargs["table_objects"],
        build=tables.subject_for,
        views=indexes.Views.of(kwargs),
        syncer=syncer,
        writer=writer,
    )
    app_settings = AppSettings()
    memo.apps, scaler = await start_apps(
        app_settings,
        kafka,
        SchemaRegistrySettings(),
        writer,
        kwargs,
        namespaced=bool(operator.listed_namespaces),
    )
    memo.scaler = scaler
    memo.tasks = start_loops(
        operator, syncer, writer, scaler, kwargs, scale_seconds=app_settings.scale_seconds
    )
    if memo.apps.access is not None:
        sweeping = principalsweeping.sweep_forever(
            memo.apps.access,
            memo.apps.kube,
            interval=app_settings.principal_sweep_seconds,
            patterns=operator.namespaces,
            listed=operator.listed_namespaces,
        )
        memo.tasks.append(asyncio.create_task(sweeping, name="rillet-principal-sweep"))
    # `rillet operator run` gives one holding kopf's stop flag; elsewhere only the probe tells.
    memo.supervisor = memo.get("supervisor") or supervision.Supervisor(stop=None)
    memo.supervisor.watch(memo.tasks)
    logging.getLogger(__name__).info(
        "Rillet operator started: Kafka %s, namespaces %s, resync every %ss, Apps scaled every %ss",
        kafka.bootstrap,
        ",".join(operator.namespaces) or "all",
        operator.resync_seconds,
        app_settings.scale_seconds,
    )


class ProgressStorage(kopf.AnnotationsProgressStorage):
    """kopf's progress in annotations `rillet.io/...`, which kopf leaves out of the changes it
    reacts to, as its own. Users' annotations of that prefix that ask for work stay in
    (USER_ANNOTATIONS): `rillet.io/rotate-credentials` (a new token is an update of the App),
    `rillet.io/adopt`, `rillet.io/managed` and `rillet.io/paused` (a change is an update of the
    Topic or Table, handled at once, not at the next resync). Their handlers also declare each
    a field, which keeps it in kopf's record of the last handled state."""

    def clear(self, *, essence: Any) -> Any:
        asked = {
            key: value
            for key, value in (essence.get("metadata", {}).get("annotations") or {}).items()
            if key in USER_ANNOTATIONS
        }
        cleared = super().clear(essence=essence)
        if asked:
            cleared.setdefault("metadata", {}).setdefault("annotations", {}).update(asked)
        return cleared


def configure(settings: kopf.OperatorSettings, operator: OperatorSettings) -> None:
    """kopf's settings: where it keeps its state, what it posts, how it queues."""
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = ProgressStorage(prefix="rillet.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="rillet.io", key="last-handled-configuration"
    )
    # Rillet posts its own Events, one per change or new problem; kopf's per-log-line Events
    # would repeat on every resync.
    settings.posting.loggers = False
    settings.watching.server_timeout = 300
    settings.queueing.error_delays = [1, 2, 5, 10, 30]
    # Bounded concurrency: a flood of new objects queues in kopf instead of holding thousands of
    # handler coroutines (and their bodies) in memory at once; the topic syncer still gets full
    # batches from these workers.
    settings.queueing.worker_limit = operator.worker_limit
    # A worker holds its slot while it idles waiting for more events of its object (kopf's
    # default is 5 s): with bounded workers that idling, not Kafka or the API, set the pace
    # of a bulk apply (about 200 slots / 5 s). Short idling frees the slot for the next object.
    settings.queueing.idle_timeout = operator.worker_idle_seconds


def topic_syncer(operator: OperatorSettings, kafka: KafkaSettings) -> TopicSyncer:
    """The syncer of Topics and Tables (not started yet)."""
    # A Kafka client per lane: through one, an apply waited for the resync's requests in flight.
    return TopicSyncer(
        TopicAdmin(kafka.client_config(), timeout=kafka.request_timeout_seconds, name="events"),
        resync_admin=TopicAdmin(
            kafka.client_config(), timeout=kafka.request_timeout_seconds, name="resync"
        ),
        max_batch=operator.batch_max_items,
        linger=operator.batch_linger_seconds,
        queue_size=operator.queue_size,
        claims=ClaimStore(
            kafka.client_config(),
            topic=operator.claims_topic,
            timeout=kafka.request_timeout_seconds,
        ),
    )


def start_loops(
    operator: OperatorSettings,
    syncer: TopicSyncer,
    writer: ObjectWriter,
    scaler: appscaling.AppScaler,
    indexes_kwargs: dict[str, Any],
    *,
    scale_seconds: float,
) -> list[asyncio.Task[None]]:
    """The operator-wide loops, started: the topic syncer, the resync, the App scaling."""
    return [
        asyncio.create_task(syncer.run(), name="rillet-topic-syncer"),
        asyncio.create_task(
            resyncing.resync_forever(
                interval=operator.resync_seconds,
                views=indexes.Views.of(indexes_kwargs),
                objects={
                    plural: (indexes_kwargs[index_name], build)
                    for plural, (index_name, build) in resyncing.KINDS.items()
                },
                syncer=syncer,
                writer=writer,
            ),
            name="rillet-resync",
        ),
        asyncio.create_task(scaler.run_forever(scale_seconds), name="rillet-app-scaling"),
    ]


@kopf.on.probe(id="started")
def started(memo: kopf.Memo, **_: Any) -> bool:
    """The health endpoint fails until start-up finished, so a readiness probe on it (and thus
    `helm install --wait`, Argo CD, `kubectl rollout status`) waits for a working operator, not
    merely a running process. It fails again if one of the operator's loops ended."""
    if not getattr(memo, "tasks", None):
        raise kopf.PermanentError("the operator is still starting")
    if memo.supervisor.failure:
        raise kopf.PermanentError(memo.supervisor.failure)
    return True


async def start_apps(
    app_settings: AppSettings,
    kafka: KafkaSettings,
    registry: SchemaRegistrySettings,
    writer: ObjectWriter,
    indexes_kwargs: dict[str, Any],
    *,
    namespaced: bool,
) -> tuple[appreconciling.AppDeps, appscaling.AppScaler]:
    """What App reconciles use, and the scaling loop (not started yet). `namespaced`: the
    operator's rights are in its watched namespaces alone. With per-App principals, the id of
    this cluster in their names is read once here (the uid of `kube-system`)."""
    kube = AppKube(namespaced=namespaced)
    cluster = ""
    if app_settings.kafka_principals:
        cluster = kafkaaccess.cluster_id(await kube.namespace_uid(CLUSTER_ID_NAMESPACE))
    env = appresolving.environment(
        app_settings, kafka, registry, apiserver_url=kube.apiserver_url, kafka_cluster=cluster
    )
    deps = appreconciling.AppDeps(
        kube=kube,
        views=indexes.AppViews.of(indexes_kwargs),
        env=env,
        access=appaccess.build(app_settings, kafka, cluster=cluster),
        registry=appregistry.build(registry),
    )
    lag = LagReader(kafka.client_config(), timeout=kafka.request_timeout_seconds)
    return deps, appscaling.AppScaler(deps=deps, lag=lag, writer=writer)


def tune_garbage_collection() -> None:
    """Collect less often: the default thresholds cost a resync more CPU than its admin calls.

    A resync of 1,000 topics allocates some 40,000 short-lived objects (librdkafka's config
    entries), which with CPython's default gen-0 threshold of 700 means dozens of collections,
    each re-walking the survivors. Freezing what start-up allocated (modules, settings) and
    raising the threshold halves the CPU of a resync. Higher thresholds (50,000) let cyclic
    garbage pile up: the peak RSS of a 1,000-object apply went from ~190 to ~260 MB.
    """
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 20, 20)


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    if "supervisor" in memo:  # absent if start-up failed before it
        memo.supervisor.release()
    if "nudger" in memo:
        await memo.nudger.stop()
    for task in memo.get("tasks", []):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if "syncer" in memo:  # its loops are cancelled: end its threads' waits for Kafka
        memo.syncer.close()
    if "scaler" in memo:  # its loop is cancelled: its Kafka clients are idle
        await asyncio.to_thread(memo.scaler.close)
