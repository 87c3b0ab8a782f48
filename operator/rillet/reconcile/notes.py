"""Pure: what a reconcile of a Topic, a Table or an App concluded, as data to write.

One `Report` type for the three flows: the status merge patch (empty when nothing changed) and
the `Note`s, each an Event to post. Handlers hand a report to kopf (its patch and event poster)
or to `rillet.k8s.writing`; nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rillet.reconcile import statuses


@dataclass(frozen=True)
class Note:
    """An Event to post about the object."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True)
class Report:
    """What a reconcile (or an App's scaling pass) concluded and what to write about it.

    `verdict`: where a Topic or Table stands (its handler retries while Kafka is unavailable);
    None for an App, whose standing is in its status patch.
    """

    status_patch: dict[str, Any]
    notes: tuple[Note, ...] = field(default_factory=tuple)
    verdict: statuses.Verdict | None = None
