"""cost: the operator's CPU and memory with COST_APPS Apps and COST_TOPICS Topics against
the Topics alone (`--only cost`).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.apps import benches, manifests, reports, settings
from rillet_devstack import installs

COST_TOPICS = 1_000


COST_APPS = 100


COST_STEADY_SECONDS = 90.0  # three resyncs, 45 scaling passes


COST_SETTLE_TIMEOUT = 900.0


@dataclass(frozen=True)
class Cost:
    settle_seconds: float
    settle_cpu: float
    steady_cpu_per_minute: float
    peak_rss_mb: float
    steady_rss_mb: float


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / settings.CLOCK_TICKS


def status_mb(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key}")


def is_ready(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def cost(b: benches.Bench, *, with_apps: bool) -> Cost:
    namespace = b.namespace("cost-apps" if with_apps else "cost-topics")
    prefix = f"{namespace}-t"
    documents = [
        manifests.topic_manifest(f"{prefix}{i:04d}", namespace, 1) for i in range(COST_TOPICS)
    ]
    if with_apps:
        documents += [
            installs.copying_app(
                f"c{i:03d}",
                namespace,
                b.image,
                source=f"{prefix}{2 * i:04d}",
                target=f"{prefix}{2 * i + 1:04d}",
                sleep_ms=0,
                scaling={},
                driver={"cpu": "64", "memory": "1Gi"},  # no node has it: Pending for ever
            )
            for i in range(COST_APPS)
        ]
    operator = b.operator(namespace)
    pid = operator.pid
    cpu_before, started = cpu_seconds(pid), time.monotonic()
    b.apply(documents)
    benches.wait_for(
        lambda: settled(b, namespace, apps=COST_APPS if with_apps else 0),
        timeout=COST_SETTLE_TIMEOUT,
        interval=2.0,
        what=f"{namespace}: every Topic Ready, every App observed with its driver Pending",
    )
    settle_seconds, settle_cpu = time.monotonic() - started, cpu_seconds(pid) - cpu_before
    steady_from, cpu_steady = time.monotonic(), cpu_seconds(pid)
    rss = []
    while time.monotonic() - steady_from < COST_STEADY_SECONDS:
        rss.append(status_mb(pid, "VmRSS"))
        time.sleep(1.0)
    steady_cpu = (cpu_seconds(pid) - cpu_steady) / (time.monotonic() - steady_from) * 60
    result = Cost(
        settle_seconds=settle_seconds,
        settle_cpu=settle_cpu,
        steady_cpu_per_minute=steady_cpu,
        peak_rss_mb=status_mb(pid, "VmHWM"),
        steady_rss_mb=statistics.median(rss),
    )
    operator.stop()
    b.drop_namespace(namespace)
    benches.delete_kafka_topics(b.admin, prefix=prefix)
    return result


def settled(b: benches.Bench, namespace: str, *, apps: int) -> bool:
    listed = b.custom.list_namespaced_custom_object(
        settings.GROUP, settings.VERSION, namespace, "topics"
    )
    if sum(is_ready(item) for item in listed["items"]) < COST_TOPICS:
        return False
    if not apps:
        return True
    bodies = b.custom.list_namespaced_custom_object(
        settings.GROUP, settings.VERSION, namespace, "apps"
    )["items"]
    observed = [
        body
        for body in bodies
        if (status := body.get("status") or {}).get("observedGeneration")
        == body["metadata"]["generation"]
        and (status.get("executors") or {}).get("desired") is not None
        and status.get("lag") is not None
    ]
    drivers = b.core.list_namespaced_pod(namespace, label_selector="rillet.io/role=driver").items
    return len(observed) == apps and len(drivers) == apps


def report_cost(baseline: Cost, full: Cost) -> reports.Report:
    lines = [
        f"cost: {COST_APPS} Apps (drivers Pending) and {COST_TOPICS} Topics vs {COST_TOPICS} "
        f"Topics alone, a fresh operator each, resync {settings.RESYNC_SECONDS:.0f} s",
        f"  {'':26}{'Topics alone':>14}{'+ Apps':>10}{'ratio':>8}",
    ]
    rows = (
        ("settle (s)", baseline.settle_seconds, full.settle_seconds),
        ("CPU-s to settle", baseline.settle_cpu, full.settle_cpu),
        ("CPU-s per minute, settled", baseline.steady_cpu_per_minute, full.steady_cpu_per_minute),
        ("peak RSS (MB)", baseline.peak_rss_mb, full.peak_rss_mb),
        ("steady RSS (MB)", baseline.steady_rss_mb, full.steady_rss_mb),
    )
    for label, before, after in rows:
        ratio = after / before if before else float("nan")
        lines.append(f"  {label:<26}{before:>14.1f}{after:>10.1f}{ratio:>7.2f}x")
    lines.append(
        f"  target RSS <= 300 MB with the Apps: peak {reports.verdict(full.peak_rss_mb <= 300)}, "
        f"steady {reports.verdict(full.steady_rss_mb <= 300)}"
    )
    figures = {
        "cost_topics_alone": dataclasses.asdict(baseline),
        "cost_with_apps": dataclasses.asdict(full),
    }
    return figures, lines
