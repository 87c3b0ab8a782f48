"""What the driver tells the operator about itself: the `rillet.io/progress` pod annotation.

The driver pod carries one annotation, rewritten every few seconds by the driver's in-cluster
loop (runtime.pod.incluster), whose value is compact JSON:

    {"executors": 3, "lastBatchTime": "2025-01-02T03:04:05Z", "rowsPerSecond": 1520.5,
     "batches": 812, "applicationId": "spark-5f0c..."}

- executors: executors registered with the driver now;
- lastBatchTime: when the App's latest micro-batch was reported finished (UTC, RFC 3339;
  null before the first one);
- rowsPerSecond: records per second the App reads from Kafka (runtime.pod.reporting says how);
- batches: micro-batches finished by all of the App's queries since the driver started;
- applicationId: Spark's application id (changes when the driver restarts);
- statePartitions: the most state partitions a stateful query of the App runs (Spark's
  numShufflePartitions of its state operators, frozen in its checkpoint at the first start),
  once such a query reported a batch; absent for a stateless App.

One model (`Progress`), one writer (`Progress.to_json`, `build_annotation_patch`) and one reader
(`read_progress`, for the operator). Purely computational.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Mapping
from typing import Any, Final

PROGRESS_ANNOTATION: Final = "rillet.io/progress"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Progress:
    """The value of the progress annotation (None: not said, or not readable)."""

    executors: int | None = None
    last_batch_time: datetime.datetime | None = None
    rows_per_second: float | None = None
    batches: int | None = None
    application_id: str | None = None
    # The state partitions of the App's stateful queries (frozen in their checkpoints): what
    # the stage after their shuffle runs at once, which the operator's executor cap counts.
    # None for a stateless App or before its first stateful batch.
    state_partitions: int | None = None

    def to_json(self) -> str:
        """The annotation's value: compact JSON, keys in a fixed order."""
        rate = self.rows_per_second
        document: dict[str, Any] = {
            "executors": self.executors,
            "lastBatchTime": format_time(self.last_batch_time),
            "rowsPerSecond": None if rate is None else round(rate, 1),
            "batches": self.batches,
            "applicationId": self.application_id,
        }
        if self.state_partitions is not None:
            document["statePartitions"] = self.state_partitions
        return json.dumps(document, separators=(",", ":"))


def format_time(moment: datetime.datetime | None) -> str | None:
    """RFC 3339 in UTC to the second, as Kubernetes writes times (None stays None)."""
    if moment is None:
        return None
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_annotation_patch(progress: Progress) -> dict[str, Any]:
    """The merge patch of the driver pod that sets the progress annotation."""
    return {"metadata": {"annotations": {PROGRESS_ANNOTATION: progress.to_json()}}}


def _number(value: Any, kind: type[int] | type[float]) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return kind(value)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _time(value: Any) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def read_progress(pod: Mapping[str, Any] | None) -> Progress:
    """The progress annotation of the driver pod; empty when absent or unreadable (a driver
    writes what it writes: a bad value must not stop the App's status)."""
    annotations = ((pod or {}).get("metadata") or {}).get("annotations") or {}
    try:
        document = json.loads(annotations.get(PROGRESS_ANNOTATION) or "{}")
    except ValueError:
        return Progress()
    if not isinstance(document, dict):
        return Progress()
    application_id = document.get("applicationId")
    return Progress(
        executors=_number(document.get("executors"), int),
        last_batch_time=_time(document.get("lastBatchTime")),
        rows_per_second=_number(document.get("rowsPerSecond"), float),
        batches=_number(document.get("batches"), int),
        application_id=application_id if isinstance(application_id, str) else None,
        state_partitions=_count(document.get("statePartitions")),
    )
