"""Whether this machine can run the worker node, and why a running node takes no new pods (its
conditions and taints, pods nobody attends to, too little free disk): what `rillet dev up` and
`rillet dev status` tell the user, and what the tests print when pods wait.
"""

from __future__ import annotations

import os
import shutil
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from rillet_devstack import node

# What `up` wants free once the images are in: the kubelet's floor above, and room for a test
# run's Kafka logs, Spark checkpoints and pod logs (a whole `make test` wrote 0.7 GB).
MIN_FREE_DISK_BYTES = 3 * 2**30
# Node conditions that, when True, stop the kubelet admitting pods.
PRESSURE_CONDITIONS = ("DiskPressure", "MemoryPressure", "PIDPressure")
_FIXES = {
    "DiskPressure": f" (under {node.EVICTION_FREE_DISK} free where the stack keeps its state:"
    " free some space, `df -h ~/.local/state/rillet`)",
}


def why_pods_wait(found: dict[str, Any]) -> list[str]:
    """What keeps the node (its API object, as JSON) from running new pods, one line each; empty
    when nothing does. A pod's own events say the same, but only once a test has waited for it."""
    status, spec = found.get("status") or {}, found.get("spec") or {}
    conditions = {c["type"]: c for c in status.get("conditions") or []}
    reasons = []
    ready = conditions.get("Ready", {})
    if ready.get("status") != "True":
        said = f": {ready['message']}" if ready.get("message") else ""
        reasons.append(f"Ready={ready.get('status', 'Unknown')}{said}")
    for kind in PRESSURE_CONDITIONS:
        if conditions.get(kind, {}).get("status") == "True":
            reasons.append(f"{kind}: {conditions[kind].get('message', '')}{_FIXES.get(kind, '')}")
    for taint in spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute"):
            reasons.append(f"taint {taint['key']}:{taint['effect']}")
    return reasons


def unattended_pods(
    pods: list[dict[str, Any]], *, now: datetime, patience: timedelta = timedelta(seconds=60)
) -> list[str]:
    """The Pending pods (API objects, as JSON) that neither the scheduler nor the kubelet has
    acted on for longer than `patience`, each with who it waits for. The scheduler looks at a pod
    (a node, or a PodScheduled condition saying why none), then the kubelet reports its
    containers (ContainerCreating at least): a pod that gets neither points to one of them
    stuck or gone."""
    unattended = []
    for pod in pods:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        created = datetime.fromisoformat(meta["creationTimestamp"].replace("Z", "+00:00"))
        if status.get("phase") != "Pending" or now - created <= patience:
            continue
        looked_at = any(c.get("type") == "PodScheduled" for c in status.get("conditions") or [])
        started = status.get("containerStatuses") or status.get("initContainerStatuses")
        if not spec.get("nodeName") and not looked_at:
            unattended.append(f"{meta['namespace']}/{meta['name']} (the scheduler)")
        elif spec.get("nodeName") and not started:
            unattended.append(f"{meta['namespace']}/{meta['name']} (the kubelet)")
    return unattended


def too_little_disk(path: Path, *, minimum: int = MIN_FREE_DISK_BYTES) -> str | None:
    """Why the filesystem holding `path` is too full for the node, or None when it is not."""
    free = shutil.disk_usage(path).free
    if free >= minimum:
        return None
    return (
        f"{free / 2**30:.1f} GiB free on the filesystem of {path}, and the node needs "
        f"{minimum / 2**30:.0f} GiB: below {node.EVICTION_FREE_DISK} its kubelet takes no pods "
        "(DiskPressure), and a test run writes Kafka logs, checkpoints and pod logs there"
    )


def can_run_node() -> str | None:
    """Why this machine cannot run the node, or None when it can (its Debian packages are
    installed by `rillet_devstack.packages` when missing)."""
    if not sys.platform.startswith("linux"):
        return "a worker node needs Linux"
    if os.geteuid() != 0:
        return "a worker node needs root (containerd, kubelet and CNI change the network)"
    return None
