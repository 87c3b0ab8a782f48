"""Topic operator benchmark: latency of one Topic, throughput of 1,000, cost of a resync.

    .venv/bin/python bench/topics.py            # starts (or reuses) the local stack

Prints, against a baseline measured in the same run (the same creates as one direct
AdminClient call):
  (a) one Topic from `kubectl apply` to visible in Kafka and to Ready: p50/p99 over 50 runs;
  (b) 1,000 Topics applied at once: time to all Ready, topics/s, operator peak RSS;
  (c) CPU seconds the operator spends per resync of 1,000 unchanged topics.
Targets: (a) p99 <= 1 s; (b) <= 30 s and RSS <= 250 MB; (c) <= 1 CPU-second.
Medians and ratios, not single timings: the machine is shared and noisy.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import httpx
import yaml
from confluent_kafka.admin import AdminClient, NewTopic
from kubernetes import client, config

from rillet_devstack import stack as devstack
from rillet_devstack import starting
from rillet_devstack.operating import OperatorProcess

REPO = Path(__file__).resolve().parents[1]
SINGLE_RUNS = 50
BULK = 1_000
RESYNC_SECONDS = 5.0
RESYNCS_MEASURED = 3
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def poll(probe: Callable[[], bool], *, timeout: float, interval: float = 0.01) -> float:
    """Seconds until `probe` holds (monotonic clock), or raise."""
    started = time.monotonic()
    while not probe():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"not done after {timeout}s")
        time.sleep(interval)
    return time.monotonic() - started


def topic_manifest(name: str, namespace: str, partitions: int = 3) -> dict[str, Any]:
    return {
        "apiVersion": "rillet.io/v1alpha1",
        "kind": "Topic",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"partitions": partitions, "config": {"retention.ms": 3_600_000}},
    }


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def is_ready(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []
    )


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def metric(port: int, name: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + " ")
    )


def single_topic_latency(
    kubeconfig: Path, namespace: str, api: client.CustomObjectsApi, admin: AdminClient
) -> tuple[list[float], list[float]]:
    to_kafka, to_ready = [], []
    for run in range(SINGLE_RUNS):
        name = f"{namespace}-single-{run:02d}"
        manifest = yaml.safe_dump(topic_manifest(name, namespace))
        started = time.monotonic()
        kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=manifest)
        seen_in_kafka: float | None = None
        while True:
            now = time.monotonic() - started
            if seen_in_kafka is None and name in admin.list_topics(timeout=5).topics:
                seen_in_kafka = now
            obj = cast(
                dict[str, Any],
                api.get_namespaced_custom_object(
                    "rillet.io", "v1alpha1", namespace, "topics", name
                ),
            )
            if is_ready(obj):
                to_ready.append(time.monotonic() - started)
                if seen_in_kafka is None:
                    seen_in_kafka = to_ready[-1]
                to_kafka.append(seen_in_kafka)
                break
            if now > 30:
                raise TimeoutError(f"{name} not Ready after 30s")
            time.sleep(0.005)
    return to_kafka, to_ready


def bulk_apply(kubeconfig: Path, namespace: str, api: client.CustomObjectsApi) -> float:
    # Names of this run only: topics left in Kafka by an earlier run would be adopted, not
    # created, and adoption is cheaper than what (b) measures.
    manifests = [topic_manifest(f"{namespace}-bulk-{i:04d}", namespace) for i in range(BULK)]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        yaml.safe_dump_all(manifests, handle)
    started = time.monotonic()
    kubectl(kubeconfig, "apply", "--server-side", "-f", handle.name)
    print(
        f"    kubectl apply of {BULK} objects returned after {time.monotonic() - started:.1f}s",
        flush=True,
    )

    def all_ready() -> bool:
        listed = cast(
            dict[str, Any],
            api.list_namespaced_custom_object("rillet.io", "v1alpha1", namespace, "topics"),
        )
        items = listed["items"]
        bulk = [item for item in items if "-bulk-" in item["metadata"]["name"]]
        return sum(is_ready(item) for item in bulk) == BULK

    poll(all_ready, timeout=600, interval=0.5)
    os.unlink(handle.name)
    return time.monotonic() - started


def baseline_create(admin: AdminClient, count: int) -> float:
    prefix = f"baseline-{uuid.uuid4().hex[:6]}"
    topics = [
        NewTopic(f"{prefix}-{i:04d}", 3, 1, config={"retention.ms": "3600000"})
        for i in range(count)
    ]
    started = time.monotonic()
    for future in admin.create_topics(topics, operation_timeout=120).values():
        future.result()
    elapsed = time.monotonic() - started
    for future in admin.delete_topics([t.topic for t in topics], operation_timeout=120).values():
        future.result()
    return elapsed


def resync_cpu(operator: OperatorProcess) -> float:
    """CPU seconds per resync pass, measured over several passes."""
    first = metric(operator.metrics_port, "rillet_resyncs_total")
    poll(lambda: metric(operator.metrics_port, "rillet_resyncs_total") >= first + 1, timeout=60)
    start_cpu, start_count = (
        cpu_seconds(operator.pid),
        metric(operator.metrics_port, "rillet_resyncs_total"),
    )
    poll(
        lambda: (
            metric(operator.metrics_port, "rillet_resyncs_total") >= start_count + RESYNCS_MEASURED
        ),
        timeout=RESYNC_SECONDS * RESYNCS_MEASURED * 4,
        interval=1.0,
    )
    return (cpu_seconds(operator.pid) - start_cpu) / RESYNCS_MEASURED


def delete_kafka_topics(admin: AdminClient, *, prefix: str) -> None:
    """Delete the run's topics (its objects are Retain): later runs start from a clean broker."""
    names = [name for name in admin.list_topics(timeout=10).topics if name.startswith(prefix)]
    if not names:  # the run failed before making any; delete_topics refuses an empty list
        return
    for future in admin.delete_topics(names, operation_timeout=120).values():
        future.result()


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> None:
    state = devstack.running() or starting.up()
    kubeconfig = state.kubeconfig
    kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    kubectl(kubeconfig, "create", "namespace", namespace)
    config.load_kube_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    api = client.CustomObjectsApi()
    admin = AdminClient({"bootstrap.servers": state.kafka_bootstrap})
    log = Path(tempfile.mkdtemp()) / "operator.log"
    operator = OperatorProcess(
        kubeconfig=kubeconfig,
        bootstrap=state.kafka_bootstrap,
        namespace_pattern=namespace,
        log=log,
        resync_seconds=RESYNC_SECONDS,
    )
    operator.start()
    try:
        poll(lambda: "Rillet operator started" in operator.log_text(), timeout=60, interval=0.1)
        baseline_one = statistics.median(baseline_create(admin, 1) for _ in range(10))
        to_kafka, to_ready = single_topic_latency(kubeconfig, namespace, api, admin)
        bulk_seconds = bulk_apply(kubeconfig, namespace, api)
        baseline_bulk = baseline_create(admin, BULK)
        rss = peak_rss_mb(operator.pid)
        per_resync = resync_cpu(operator)
    finally:
        operator.stop()
        kubectl(kubeconfig, "delete", "namespace", namespace, "--wait=false")
        delete_kafka_topics(admin, prefix=f"{namespace}-")

    results = {
        "a_to_kafka_p50_s": statistics.median(to_kafka),
        "a_to_kafka_p99_s": percentile(to_kafka, 0.99),
        "a_to_ready_p50_s": statistics.median(to_ready),
        "a_to_ready_p99_s": percentile(to_ready, 0.99),
        "a_baseline_adminclient_create_one_p50_s": baseline_one,
        "b_bulk_all_ready_s": bulk_seconds,
        "b_topics_per_s": BULK / bulk_seconds,
        "b_baseline_adminclient_create_1000_s": baseline_bulk,
        "b_operator_peak_rss_mb": rss,
        "c_cpu_seconds_per_resync_of_1000": per_resync,
    }
    print(json.dumps(results, indent=2))
    report(results)


def report(results: dict[str, float]) -> None:
    """The summary lines of the figures, with the targets."""
    baseline_one = results["a_baseline_adminclient_create_one_p50_s"]
    bulk_seconds = results["b_bulk_all_ready_s"]
    baseline_bulk = results["b_baseline_adminclient_create_1000_s"]
    rss = results["b_operator_peak_rss_mb"]
    per_resync = results["c_cpu_seconds_per_resync_of_1000"]
    print(
        f"(a) apply->Kafka p50 {results['a_to_kafka_p50_s']:.3f}s p99 "
        f"{results['a_to_kafka_p99_s']:.3f}s; apply->Ready p50 {results['a_to_ready_p50_s']:.3f}s "
        f"p99 {results['a_to_ready_p99_s']:.3f}s; baseline create {baseline_one:.3f}s; "
        f"ratio Ready p50/baseline {results['a_to_ready_p50_s'] / baseline_one:.1f}x  "
        f"target p99<=1s {verdict(results['a_to_ready_p99_s'] <= 1.0)}"
    )
    print(
        f"(b) {BULK} topics Ready in {bulk_seconds:.1f}s ({BULK / bulk_seconds:.0f} topics/s); "
        f"baseline one AdminClient call {baseline_bulk:.1f}s (ratio "
        f"{bulk_seconds / baseline_bulk:.1f}x); peak RSS {rss:.0f} MB  target <=30s "
        f"{verdict(bulk_seconds <= 30)}, RSS<=250MB {verdict(rss <= 250)}"
    )
    print(
        f"(c) {per_resync:.3f} CPU-s per resync of {BULK} unchanged topics  target <=1 "
        f"{verdict(per_resync <= 1.0)}"
    )


if __name__ == "__main__":
    main()
