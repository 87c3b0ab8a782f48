"""The Events an App posts when executors are lost with their node: once per loss, not per pass."""

from __future__ import annotations

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
