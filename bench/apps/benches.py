"""The stack and its clients for one run (`Bench`), and what cleans up after it: namespaces,
operators, Kafka topics and consumer groups named after the run.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from bench.apps import settings
from rillet_devstack import stack as devstack
from rillet_devstack import tools
from rillet_devstack.operating import OperatorProcess


@dataclass
class Bench:
    """The stack, the clients, and everything this run made (removed by `cleanup`)."""

    state: devstack.StackState
    image: str
    run: str
    admin: AdminClient
    custom: Any  # kubernetes' CustomObjectsApi, CoreV1Api (untyped)
    core: Any
    apiserver_url: str
    logs: Path
    free_cpu_millis: int  # CPU the node's pods leave unrequested when the run starts
    namespaces: list[str] = field(default_factory=list)
    operators: list[OperatorProcess] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return self.state.kafka_bootstrap

    def fitting_cpu(self, executors: int) -> str:
        """The CPU request of each of `executors` executors so that they and their driver fit
        the node beside what runs there already: EXECUTOR_CPU_MILLIS, or less."""
        share = (self.free_cpu_millis - settings.DRIVER_CPU_MILLIS) // executors
        if share < 50:
            raise SystemExit(f"the node has {self.free_cpu_millis}m CPU free: too little")
        return f"{min(settings.EXECUTOR_CPU_MILLIS, share // 10 * 10)}m"

    def kubectl(self, *args: str, stdin: str | None = None, timeout: float = 300) -> str:
        result = tools.run_kubectl(self.state.kubeconfig, args, input=stdin, timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args[:3])} ...: {result.stderr.strip()}")
        return result.stdout

    def apply(self, manifests: Iterable[dict[str, Any]]) -> None:
        text = yaml.safe_dump_all(list(manifests))
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=self.logs) as handle:
            handle.write(text)
            handle.flush()
            self.kubectl("apply", "--server-side", "--field-manager=bench", "-f", handle.name)

    def namespace(self, suffix: str) -> str:
        name = f"{self.run}-{suffix}"
        self.kubectl("create", "namespace", name)
        self.namespaces.append(name)
        return name

    def operator(self, namespace: str) -> OperatorProcess:
        """A fresh operator watching `namespace` alone, started."""
        process = OperatorProcess(
            kubeconfig=self.state.kubeconfig,
            bootstrap=self.bootstrap,
            namespace_pattern=namespace,
            log=self.logs / f"operator-{namespace}.log",
            resync_seconds=settings.RESYNC_SECONDS,
        )
        self.operators.append(process)
        process.start()
        wait_for(
            lambda: "Rillet operator started" in process.log_text(),
            timeout=60,
            interval=0.1,
            what=f"the operator of {namespace} to start (log {process.log})",
        )
        return process

    def drop_namespace(self, name: str) -> None:
        """Delete a namespace of the run and wait until it is gone (its pods with it)."""
        self.kubectl("delete", "namespace", name, "--ignore-not-found", "--timeout=300s")
        if name in self.namespaces:
            self.namespaces.remove(name)

    def cleanup(self) -> None:
        """Operators, namespaces, Kafka topics and consumer groups of the run; never raises."""
        for process in self.operators:
            process.stop()
        for name in list(self.namespaces):
            try:
                self.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")
            except Exception as error:
                print(f"cleanup: deleting namespace {name} failed: {error}", flush=True)
        for name in list(self.namespaces):
            try:
                self.drop_namespace(name)
            except Exception as error:
                print(f"cleanup: namespace {name} not gone: {error}", flush=True)
        try:
            delete_kafka_topics(self.admin, prefix=f"{self.run}-")
            # Groups are rillet.<namespace>.<app>, and every namespace of the run starts with it.
            delete_groups(self.admin, prefix=f"rillet.{self.run}-")
        except Exception as error:
            print(f"cleanup: Kafka: {error}", flush=True)


def cpu_millis(quantity: str) -> int:
    """A Kubernetes CPU quantity ("250m", "2", "0.5") in millicores."""
    if quantity.endswith("m"):
        return int(quantity[:-1])
    return round(float(quantity) * 1000)


def free_cpu(core: Any, node_name: str) -> int:
    """Millicores of the node's allocatable CPU that no running or pending pod requests."""
    allocatable = cpu_millis(core.read_node(node_name).status.allocatable["cpu"])
    requested = 0
    for pod in core.list_pod_for_all_namespaces().items:
        if pod.status.phase in ("Succeeded", "Failed"):
            continue
        if pod.spec.node_name not in (None, node_name):
            continue
        for container in pod.spec.containers:
            requests = (container.resources.requests if container.resources else None) or {}
            requested += cpu_millis(requests.get("cpu", "0"))
    return allocatable - requested


def wait_for(probe: Callable[[], Any], *, timeout: float, what: str, interval: float = 1.0) -> Any:
    """The first truthy value of `probe`, polled until `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        time.sleep(interval)


def delete_kafka_topics(admin: AdminClient, *, prefix: str) -> None:
    names = [name for name in admin.list_topics(timeout=10).topics if name.startswith(prefix)]
    if not names:  # delete_topics refuses an empty list
        return
    for future in admin.delete_topics(names, operation_timeout=120).values():
        try:
            future.result()
        except KafkaException as error:  # already being deleted
            if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise


def delete_groups(admin: AdminClient, *, prefix: str) -> None:
    listed = admin.list_consumer_groups(request_timeout=30).result()
    names = [g.group_id for g in listed.valid if g.group_id.startswith(prefix)]
    if names:
        for future in admin.delete_consumer_groups(names, request_timeout=30).values():
            future.result()
