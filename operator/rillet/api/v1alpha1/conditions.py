"""Status conditions, shaped like metav1.Condition, and the status fields every kind shares.

Rillet writes three condition types, read the way kstatus (Flux, Argo CD, `kubectl wait`) reads
them: Ready=True when the object is in the state its spec asks for; Reconciling=True while the
operator is working towards it; Stalled=True when it cannot get there without a change from the
user (the reason says why). Ready=False alone means "in progress", never "failed".
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from rillet.api.v1alpha1 import fields, objects

READY = "Ready"
RECONCILING = "Reconciling"
STALLED = "Stalled"

ConditionStatus = Literal["True", "False", "Unknown"]

# The patterns and bounds of metav1.Condition.
CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
MAX_MESSAGE_LENGTH = 32768


class Condition(objects.WireModel):
    """One aspect of the object's current state, as last observed by the operator."""

    type: Annotated[str, Field(max_length=316, pattern=CONDITION_TYPE_PATTERN)] = Field(
        description="Condition type: Ready, Reconciling or Stalled.",
    )
    status: ConditionStatus = Field(description="Status of the condition: True, False or Unknown.")
    reason: Annotated[str, Field(min_length=1, max_length=1024, pattern=REASON_PATTERN)] = Field(
        description="Why the condition has its status, as one CamelCase word (e.g. TopicCreated).",
    )
    message: Annotated[str, Field(max_length=MAX_MESSAGE_LENGTH)] = Field(
        description="Human-readable details of the condition; may be empty.",
    )
    last_transition_time: datetime = Field(
        strict=False,
        description="When the condition last changed status.",
    )
    observed_generation: fields.Count64 | None = Field(
        default=None,
        description="The metadata.generation the condition was derived from.",
    )


class Status(objects.WireModel):
    """What every kind reports: the generation last acted upon, and conditions."""

    observed_generation: fields.Count64 | None = Field(
        default=None,
        description="The metadata.generation the operator last reconciled.",
    )
    conditions: list[Condition] | None = Field(
        default=None,
        description="Ready, Reconciling and Stalled conditions (kstatus conventions), one per "
        "type.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
    )

    def condition(self, condition_type: str) -> Condition | None:
        """The condition of `condition_type`, if present."""
        return next((c for c in self.conditions or () if c.type == condition_type), None)
