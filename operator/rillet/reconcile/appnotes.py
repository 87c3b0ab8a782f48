"""Pure: the Events an App's reconcile and scaling pass post, as `notes.Note`s.

One per change, never one per pass: a new standing (a stalled App's new message too), what
applying the objects did to the driver, a scaling decision that changes the executor count,
executors lost with their node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from rillet.reconcile import (
    appobservations,
    appstatus,
    kafkaaccess,
    naming,
    notes,
    scalingdecisions,
    statuses,
)

EXECUTORS_LOST: Final = "ExecutorsLost"


class Applied(Protocol):
    """What applying an App's objects changed about its driver (`k8s.applying.Applied`)."""

    @property
    def created(self) -> bool: ...

    @property
    def rolled(self) -> bool: ...

    @property
    def replaced(self) -> tuple[str, ...]: ...


def ready_condition(status: Mapping[str, Any] | None) -> dict[str, Any]:
    """The condition saying where the App last stood (Ready; Stalled for a suspended App, which
    has no Ready), {} when there is none."""
    return statuses.standing_condition((status or {}).get("conditions"))


def standing_notes(
    previous: Mapping[str, Any] | None, standing: appstatus.Standing
) -> tuple[notes.Note, ...]:
    """An Event when the App's standing changes (a stalled one also when its message does).

    A running App's message (executors, lag) changes all the time: that alone is no Event.
    """
    before, verdict = ready_condition(previous), standing.verdict
    stalled = verdict.state == "stalled"
    if before.get("reason") == verdict.reason and (
        not stalled or before.get("message") == verdict.message
    ):
        return ()
    return (notes.Note("Warning" if stalled else "Normal", verdict.reason, verdict.message),)


def applied_notes(name: str, applied: Applied | None) -> tuple[notes.Note, ...]:
    """An Event for what applying the objects did to the driver, if anything."""
    if applied is None:
        return ()
    driver = naming.app_driver_name(name)
    if applied.created:
        message = (
            f"created the driver StatefulSet {driver}, with its ServiceAccount, RoleBinding, "
            "ConfigMap and Service"
        )
        return (notes.Note("Normal", "DriverCreated", message),)
    if applied.replaced:
        message = (
            f"recreated StatefulSet {driver}: its {', '.join(applied.replaced)} cannot change in "
            "place; the checkpoint volume is kept"
        )
        return (notes.Note("Normal", "DriverReplaced", message),)
    if applied.rolled:
        message = "the spec changed: the driver stops at the end of a batch and starts again"
        return (notes.Note("Normal", "DriverRolling", message),)
    return ()


POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"
RESTRICTED = "restricted"


def pod_security_notes(
    namespace: str, level: str | None, applied: Applied | None
) -> tuple[notes.Note, ...]:
    """A Warning as a driver (re)starts in a namespace that does not enforce the restricted Pod
    Security level (`level`: its label, '' for none; None: not known, nothing said): whoever
    may create an App there runs code in its pods, which only that level keeps off the node."""
    started = applied is not None and (applied.created or applied.rolled or bool(applied.replaced))
    if not started or level is None or level == RESTRICTED:
        return ()
    message = (
        f"namespace {namespace} does not enforce the restricted Pod Security level "
        f"({POD_SECURITY_ENFORCE}={level or 'unset'}): label it "
        f"{POD_SECURITY_ENFORCE}={RESTRICTED}, which Rillet's pods meet (docs/security-model.md)"
    )
    return (notes.Note("Warning", "PodSecurityNotRestricted", message),)


def scale_note(
    before: int | None, decision: scalingdecisions.ScalingDecision
) -> tuple[notes.Note, ...]:
    """An Event when the decision changes the executor count."""
    if before == decision.desired:
        return ()
    change = f"{before} to {decision.desired}" if before is not None else f"{decision.desired}"
    return (notes.Note("Normal", "ExecutorsScaled", f"executors {change}: {decision.message}"),)


def granted_notes(user: str, changes: Sequence[str]) -> tuple[notes.Note, ...]:
    """An Event for what provisioning the App's Kafka principal changed, if anything."""
    if not changes:
        return ()
    message = f"Kafka principal {kafkaaccess.principal(user)}: {'; '.join(changes)}"
    return (notes.Note("Normal", "KafkaAccessGranted", message),)


def rotated_note(user: str, secret_name: str) -> tuple[notes.Note, ...]:
    """An Event for a rotated password (never the password: the Secret holds it)."""
    message = (
        f"a new password of Kafka principal {kafkaaccess.principal(user)} is set and in Secret "
        f"{secret_name}; the driver restarts to log in with it"
    )
    return (notes.Note("Normal", "CredentialsRotated", message),)


def lost_executors_note(
    previous: Mapping[str, Any], observation: appobservations.AppObservation
) -> tuple[notes.Note, ...]:
    """A Warning when executors are lost with their node (none lost at the last pass)."""
    before = (previous.get("executors") or {}).get("lost") or 0
    lost = observation.executors_lost
    if not lost or before:
        return ()
    message = (
        f"{lost} executor(s) lost with their node (not Ready): their pods are deleted, and "
        "Spark runs their tasks again on the executors left and on new ones, within the cap"
    )
    return (notes.Note("Warning", EXECUTORS_LOST, message),)
