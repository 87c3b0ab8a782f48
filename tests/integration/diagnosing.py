"""What the cluster looked like when a test that runs pods failed: every App's conditions, the
App pods' nodes, phases, restarts and last termination messages, the drivers' last log lines,
and whether a running App pod reached Kafka. Attached to the failure's report, so that a CI
run's failure can be read afterwards (two CI runs once failed with an App stuck and printed only
`last seen: False`)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # conftest attaches this module's story to its reports
    from .conftest import Kube

LOG_LINES = 25


def cluster_story(kube: Kube, kafka_bootstrap: str) -> str:
    """The Apps and App pods of every namespace, as text (errors reading them said inline)."""
    parts: list[str] = []
    for read in (_apps, _pods, _driver_logs, _kafka_reach):
        try:
            parts.append(read(kube, kafka_bootstrap))
        except Exception as error:  # a diagnosis never hides the failure it explains
            parts.append(f"{read.__name__}: could not read: {error!r}")
    return "\n".join(parts)


def _apps(kube: Kube, _: str) -> str:
    lines = ["Apps:"]
    for app in kube.api.list("app"):
        meta, status = app["metadata"], app.get("status", {})
        lines.append(f"  {meta['namespace']}/{meta['name']} phase={status.get('phase')}")
        lines += [
            f"    {c['type']}={c['status']} {c.get('reason')}: {c.get('message', '')[:400]}"
            for c in status.get("conditions", [])
        ]
        if executors := status.get("executors"):
            lines.append(f"    executors: {executors}")
    return "\n".join(lines)


def _app_pods(kube: Kube) -> list[dict[str, Any]]:
    return kube.api.list("pod", labels="rillet.io/role")


def _pods(kube: Kube, _: str) -> str:
    lines = ["App pods:"]
    for pod in _app_pods(kube):
        meta, status = pod["metadata"], pod.get("status", {})
        lines.append(
            f"  {meta['namespace']}/{meta['name']} on {pod['spec'].get('nodeName')}"
            f" phase={status.get('phase')}"
        )
        for container in status.get("containerStatuses", []):
            last = container.get("lastState", {}).get("terminated") or {}
            lines.append(
                f"    {container['name']}: restarts={container.get('restartCount')}"
                f" state={list(container.get('state', {}))} last exit={last.get('exitCode')}"
                f" {(last.get('message') or '')[-400:]!r}"
            )
    return "\n".join(lines)


def _driver_logs(kube: Kube, _: str) -> str:
    lines = []
    for pod in _app_pods(kube):
        if pod["metadata"]["labels"].get("rillet.io/role") != "driver":
            continue
        where = ["-n", pod["metadata"]["namespace"], pod["metadata"]["name"]]
        for previous in ([], ["--previous"]):
            got = kube.kubectl("logs", *where, f"--tail={LOG_LINES}", *previous, check=False)
            lines.append(f"log of {'/'.join(where[1:])} {' '.join(previous)}:")
            lines.append(got.stdout or got.stderr)
    return "\n".join(lines)


def _kafka_reach(kube: Kube, kafka_bootstrap: str) -> str:
    """Whether a TCP connection from each running App pod reaches Kafka's bootstrap server."""
    host, port = kafka_bootstrap.split(",")[0].rsplit(":", 1)
    script = f"timeout 10 bash -c 'exec 3<>/dev/tcp/{host}/{port}' && echo reached || echo NOT"
    lines = [f"Kafka ({host}:{port}) from App pods:"]
    for pod in _app_pods(kube):
        if pod.get("status", {}).get("phase") != "Running":
            continue
        meta = pod["metadata"]
        got = kube.kubectl(
            "exec",
            "-n",
            meta["namespace"],
            meta["name"],
            "--",
            "bash",
            "-c",
            script,
            check=False,
            timeout=30,
        )
        said = (got.stdout + got.stderr).strip().replace("\n", " ")
        lines.append(f"  {meta['name']} on {pod['spec'].get('nodeName')}: {shlex.quote(said)}")
    return "\n".join(lines)
