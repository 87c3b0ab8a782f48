"""What the operator tells the driver: the `rillet.io/executors-desired` pod annotation.

The operator's scaling loop decides each App's executor count, writes it into the App's
`status.executors.desired` (which users read) and onto the driver pod as this annotation, a
decimal count such as "3". The driver's in-cluster loop (runtime.pod.incluster) watches its own
pod and asks Spark for that many executors: the driver needs no right on its App, only on pods
of its namespace, which Spark's Kubernetes backend needs anyway (a fixed ClusterRole then grants
every driver the same rights, and no Role is made per App).

One writer (`build_desired_patch`, for the operator) and one reader (`read_desired`, for the
driver). Purely computational.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

DESIRED_ANNOTATION: Final = "rillet.io/executors-desired"


def build_desired_patch(desired: int) -> dict[str, Any]:
    """The merge patch of the driver pod that sets the desired executor count."""
    return {"metadata": {"annotations": {DESIRED_ANNOTATION: str(desired)}}}


def read_desired(pod: Mapping[str, Any] | None) -> int | None:
    """The driver pod's desired executor count; None when absent or not a count (a driver
    just started, before the operator's next pass: it keeps the count it started with)."""
    metadata = (pod or {}).get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    value = annotations.get(DESIRED_ANNOTATION) if isinstance(annotations, Mapping) else None
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        return None
    return int(value)


def desired_patch(pod: Mapping[str, Any] | None, desired: int | None) -> dict[str, Any] | None:
    """The patch that brings the driver pod's annotation to `desired`; None when there is no
    pod, no count decided, or the pod says it already."""
    if pod is None or desired is None or desired < 0 or read_desired(pod) == desired:
        return None
    return build_desired_patch(desired)
