"""The driver as a pod of the App's StatefulSet: its settings and its loop beside the App.

The operator starts `rillet drive` in the driver pod with the pod's identity from the downward
API (POD_NAME, POD_IP, POD_NAMESPACE), the App's name (RILLET_APP_NAME) and the Spark settings
it built (RILLET_SPARK_CONF_JSON: master, image, namespace, credentials, ports, executor size).
This module turns those into the driver's Spark conf (`build_drive_conf`), runs the loop beside
the App (`alongside`): it reads the desired executor count the operator writes on the driver's
own pod (`driverapi.desires`) and applies it (`scaling.Scaler`) as soon as a watch of the pod
sees the count change, and every `SCALE_SECONDS` in any case; every `REPORT_SECONDS` and after
each scale action it patches the pod's progress annotation (`reporting`). Why a driver failed
goes to the operator in the pod's termination message (`terminating`).

The loop never stops the App: a failed read, watch or patch is logged and tried again later. It
needs the in-cluster credentials of the pod's ServiceAccount (the chart's driver ClusterRole,
bound in the App's namespace, grants `get`, `watch` and `patch` on pods: what Spark's
Kubernetes backend needs anyway, and no right on the App); without them (a driver outside a
cluster) the App runs without it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from rillet.driverapi import desires, reports, wiring
from rillet.runtime.pod import reporting, scaling, terminating

if TYPE_CHECKING:  # pyspark only at run time, from inside a running driver
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

SCALE_SECONDS = 2.0
# One watch request lasts this long, then another starts (the apiserver ends watches anyway).
WATCH_SECONDS = 300
# After a failed watch (an apiserver restart): the loop's period still reads the count meanwhile.
WATCH_RETRY_SECONDS = 30.0
REPORT_SECONDS = 5.0
REQUEST_TIMEOUT_SECONDS = 5.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class PodIdentity:
    """Who the driver is: its pod and the App it runs (None when not given)."""

    pod_name: str | None
    pod_ip: str | None
    namespace: str | None
    app_name: str | None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> PodIdentity:
        """From the downward-API and operator environment variables (empty counts as unset)."""

        def get(name: str) -> str | None:
            return environ.get(name) or None

        return cls(
            pod_name=get(wiring.POD_NAME_ENV),
            pod_ip=get(wiring.POD_IP_ENV),
            namespace=get(wiring.POD_NAMESPACE_ENV),
            app_name=get(wiring.APP_NAME_ENV),
        )


def build_drive_conf(
    *,
    operator_conf: Mapping[str, str],
    pod: PodIdentity,
    app_name: str,
    jars: str | None,
    executor_pod_template: str | None,
) -> dict[str, str]:
    """The driver pod's Spark conf: the operator's, with the pod's own settings.

    The application name and the connector jars are defaults the operator's conf may replace.
    The driver's address (executors connect to it) and pod name (executor pods are owned by it,
    so they go when it goes) come from the pod itself and always win.
    """
    conf = {"spark.app.name": app_name, **({"spark.jars": jars} if jars else {}), **operator_conf}
    if executor_pod_template:
        conf["spark.kubernetes.executor.podTemplateFile"] = executor_pod_template
    if pod.pod_ip:
        conf["spark.driver.host"] = pod.pod_ip
    if pod.pod_name:
        conf["spark.kubernetes.driver.pod.name"] = pod.pod_name
    return conf


def missing_pod_settings(conf: Mapping[str, str], pod: PodIdentity) -> list[str]:
    """The downward-API variables a driver on Kubernetes cannot run without."""
    if not conf.get("spark.master", "").startswith("k8s://"):
        return []
    return [
        name
        for name, value in ((wiring.POD_IP_ENV, pod.pod_ip), (wiring.POD_NAME_ENV, pod.pod_name))
        if not value
    ]


class Kube(Protocol):
    """The Kubernetes calls of the loop (KubeAccess; fakes in tests)."""

    pod_name: str

    def read_desired(self) -> int | None: ...
    def watch_desired(self, timeout_seconds: int) -> Iterator[int | None]: ...
    def patch_progress(self, report: reports.Progress) -> None: ...
    def close(self) -> None: ...


class KubeAccess:
    """The driver's Kubernetes calls: read, watch and patch its own pod."""

    def __init__(self, api: Any, *, namespace: str, pod_name: str) -> None:
        from kubernetes import client

        self._api = api
        self._core = client.CoreV1Api(api)
        self.namespace, self.pod_name = namespace, pod_name

    @classmethod
    def in_cluster(cls, *, namespace: str, pod_name: str) -> KubeAccess:
        """With the pod's ServiceAccount; raises kubernetes' ConfigException outside a pod."""
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration
        )
        return cls(client.ApiClient(configuration), namespace=namespace, pod_name=pod_name)

    def read_desired(self) -> int | None:
        """The desired executor count on the driver's pod (None: not written yet)."""
        pod = self._core.read_namespaced_pod(
            self.pod_name, self.namespace, _request_timeout=REQUEST_TIMEOUT_SECONDS
        )
        annotations = pod.metadata.annotations if pod.metadata else None
        return desires.read_desired({"metadata": {"annotations": annotations}})

    def watch_desired(self, timeout_seconds: int) -> Iterator[int | None]:
        """The desired executor count on the driver's pod each time the pod changes (first as
        it is now), for one watch request of at most `timeout_seconds`; raises when the watch
        fails. A watch of one pod, by a metadata.name field selector."""
        from kubernetes import watch

        events = watch.Watch().stream(  # type: ignore[no-untyped-call]
            self._core.list_namespaced_pod,
            self.namespace,
            field_selector=f"metadata.name={self.pod_name}",
            timeout_seconds=timeout_seconds,
            _request_timeout=timeout_seconds + REQUEST_TIMEOUT_SECONDS,
        )
        for event in events:
            pod = event.get("raw_object")
            yield desires.read_desired(pod) if isinstance(pod, Mapping) else None

    def patch_progress(self, report: reports.Progress) -> None:
        """Set the pod's progress annotation (a strategic merge patch of its metadata)."""
        self._core.patch_namespaced_pod(
            self.pod_name,
            self.namespace,
            reports.build_annotation_patch(report),
            _request_timeout=REQUEST_TIMEOUT_SECONDS,
        )

    def close(self) -> None:
        """Release the HTTP connections."""
        self._api.close()


class InClusterLoop:
    """The driver's loop beside the App: scale executors, report progress (own thread)."""

    def __init__(
        self,
        *,
        kube: Kube,
        scaler: scaling.Scaler,
        tally: reporting.BatchTally,
        application_id: str,
        scale_seconds: float = SCALE_SECONDS,
        report_seconds: float = REPORT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kube, self._scaler, self._tally = kube, scaler, tally
        self._application_id = application_id
        self._scale_seconds, self._report_seconds = scale_seconds, report_seconds
        self._clock = clock
        self._reported_at: float | None = None
        self._reported: str | None = None
        self._problems: dict[str, str] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()  # a step now: stopping, or the desired count changed
        self._thread = threading.Thread(target=self._run, name="rillet-incluster", daemon=True)
        self._watcher = threading.Thread(
            target=self._watch, name="rillet-incluster-watch", daemon=True
        )

    def start(self) -> None:
        """Run the loop, and the watch that wakes it, in their threads."""
        self._thread.start()
        self._watcher.start()

    def stop(self, timeout: float = 10.0) -> None:
        """End the loop (after the step it is in) and release the client (which ends the
        watch's request)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._kube.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # a bug here must not end the loop, let alone the App
                log.exception("the in-cluster loop failed a step (the App keeps running)")
            self._wake.wait(self._scale_seconds)
            self._wake.clear()

    def _watch(self) -> None:
        """Wake the loop as soon as the desired count on the pod changes: executors are asked for
        the moment the operator decides, not up to SCALE_SECONDS later."""
        seen: int | None = None
        while not self._stop.is_set():
            try:
                for desired in self._kube.watch_desired(WATCH_SECONDS):
                    if desired != seen:
                        seen = desired
                        self._wake.set()
                    if self._stop.is_set():
                        return
            except Exception as error:
                if self._stop.is_set():
                    return  # the client was closed under the watch
                self._trouble("watch", "watching the driver's pod failed", error)
                self._stop.wait(WATCH_RETRY_SECONDS)

    def tick(self) -> None:
        """One step: apply the desired executor count; report progress when due or scaled."""
        scaled = self._scale()
        now = self._clock()
        if scaled or self._reported_at is None or now - self._reported_at >= self._report_seconds:
            self._reported_at = now
            self._report()

    def _scale(self) -> bool:
        """Apply the desired count, if the pod has one; True when Spark was asked for a change."""
        try:
            desired = self._kube.read_desired()
            self._problems.pop("read", None)
        except Exception as error:
            self._trouble("read", f"reading pod {self._kube.pod_name} failed", error)
            desired = None
        try:
            self._scaler.ensure_started()
            if desired is None:
                self._scaler.observe()  # the executor count still goes into the report
                action = None
            else:
                action = self._scaler.apply(desired)
            self._problems.pop("scale", None)
        except Exception as error:  # py4j: the SparkContext may be stopping
            self._trouble("scale", "scaling executors failed", error)
            return False
        return action is not None

    def _report(self) -> None:
        report = self._tally.report(
            executors=len(self._scaler.registered), application_id=self._application_id
        )
        value = report.to_json()
        if value == self._reported:
            return
        try:
            self._kube.patch_progress(report)
        except Exception as error:
            log.debug(
                "patching the progress annotation failed: %s", terminating.describe_failure(error)
            )
            return
        self._reported = value

    def _trouble(self, kind: str, what: str, error: BaseException) -> None:
        """Log a failure once at warning while it repeats, at debug afterwards."""
        line = f"{what}: {terminating.describe_failure(error)}"
        level = logging.DEBUG if self._problems.get(kind) == line else logging.WARNING
        self._problems[kind] = line
        log.log(level, "%s (the App keeps running)", line)


@contextlib.contextmanager
def alongside(
    spark: SparkSession, *, pod: PodIdentity, tally: reporting.BatchTally
) -> Iterator[None]:
    """Run the in-cluster loop while inside, when the driver runs in a pod of a cluster."""
    loop = _start_loop(spark, pod=pod, tally=tally)
    try:
        yield
    finally:
        if loop is not None:
            loop.stop()


def _start_loop(
    spark: SparkSession, *, pod: PodIdentity, tally: reporting.BatchTally
) -> InClusterLoop | None:
    from kubernetes.config import ConfigException

    if pod.pod_name is None or pod.namespace is None:
        log.warning(
            "%s or %s not set: no live scaling, no progress annotation",
            wiring.POD_NAME_ENV,
            wiring.POD_NAMESPACE_ENV,
        )
        return None
    try:
        kube = KubeAccess.in_cluster(namespace=pod.namespace, pod_name=pod.pod_name)
    except ConfigException as error:
        log.warning("not in a cluster (%s): no live scaling, no progress annotation", error)
        return None
    try:
        sc = spark.sparkContext
        loop = InClusterLoop(
            kube=kube,
            scaler=scaling.Scaler(scaling.SparkExecutors(sc)),
            tally=tally,
            application_id=str(sc.applicationId),
        )
    except Exception as error:  # the App runs on without the loop
        log.warning(
            "no live scaling, no progress annotation: %s", terminating.describe_failure(error)
        )
        kube.close()
        return None
    loop.start()
    log.info(
        "executor count from, and progress on, pod %s in %s (watched; read every %ss)",
        pod.pod_name,
        pod.namespace,
        SCALE_SECONDS,
    )
    return loop
