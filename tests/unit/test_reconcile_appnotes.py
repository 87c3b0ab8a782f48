"""Events an App posts once, not per pass: executors lost with their node; a driver starting in
a namespace whose pods are not held to the restricted Pod Security level."""

from __future__ import annotations

from dataclasses import dataclass

from rillet.reconcile import appnotes
from rillet.reconcile.appobservations import AppObservation


def test_executors_lost_with_their_node_are_told_once() -> None:
    lost = AppObservation(generation=1, executors_lost=2)
    (note,) = appnotes.lost_executors_note({"executors": {"ready": 3}}, lost)
    assert (note.type, note.reason) == ("Warning", "ExecutorsLost")
    assert note.message.startswith("2 executor(s) lost with their node")
    # Already told (the status says so): no second Event while the same loss lasts.
    assert appnotes.lost_executors_note({"executors": {"lost": 2}}, lost) == ()
    assert appnotes.lost_executors_note({}, AppObservation(generation=1)) == ()


@dataclass(frozen=True)
class Applied:
    """What applying did to the driver, as k8s.applying reports it."""

    created: bool = False
    rolled: bool = False
    replaced: tuple[str, ...] = ()


def test_a_driver_starting_where_pods_are_not_restricted_is_warned_about_once() -> None:
    created, rolled, untouched = Applied(created=True), Applied(rolled=True), Applied()
    (warning,) = appnotes.pod_security_notes("team", "", created)
    assert (warning.type, warning.reason) == ("Warning", "PodSecurityNotRestricted")
    assert "pod-security.kubernetes.io/enforce=unset" in warning.message
    assert "pod-security.kubernetes.io/enforce=restricted" in warning.message
    (baseline,) = appnotes.pod_security_notes("team", "baseline", rolled)
    assert "enforce=baseline" in baseline.message
    # Nothing while the driver runs on, where it is restricted, or where the level is unknown.
    assert appnotes.pod_security_notes("team", "", untouched) == ()
    assert appnotes.pod_security_notes("team", "", None) == ()
    assert appnotes.pod_security_notes("team", "restricted", created) == ()
    assert appnotes.pod_security_notes("team", None, created) == ()
